// Hadoop's local file system, setting permissions through java.nio instead of a process.
//
// Without Hadoop's native library (Spark's pip package has none) RawLocalFileSystem runs the
// `chmod` command for every file and directory it creates, some 20 per batch of a streaming
// query on a local disk (Spark's offset, commit and source logs, each a
// temporary file and its checksum, then the batch's output). streamjoin compiles this file with
// Spark's own Java compiler (janino) and puts it on a local driver's class path; see
// streamjoin/runtime/local/localfs.py. Kept to what janino compiles: no generics, no conditional
// expressions.
package streamjoin.localfs;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

public class LocalFiles extends LocalFileSystem {
  public LocalFiles() {
    super(new Raw());
  }

  public static class Raw extends RawLocalFileSystem {
    public void setPermission(Path p, FsPermission permission) throws IOException {
      int mode = permission.toShort();
      // The sticky, setuid and setgid bits have no java.nio form: those go through chmod.
      if ((mode & ~0777) != 0) {
        super.setPermission(p, permission);
        return;
      }
      String letters = "rwxrwxrwx";
      StringBuilder text = new StringBuilder();
      for (int i = 0; i < 9; i++) {
        if ((mode & (0400 >> i)) != 0) {
          text.append(letters.charAt(i));
        } else {
          text.append('-');
        }
      }
      java.io.File file = pathToFile(p);
      try {
        Files.setPosixFilePermissions(file.toPath(), PosixFilePermissions.fromString(text.toString()));
      } catch (NoSuchFileException e) {
        // (what Hadoop's callers expect of a path that is not there)
        throw new FileNotFoundException("File " + file + " does not exist");
      } catch (UnsupportedOperationException e) {
        super.setPermission(p, permission);  // (a file system without POSIX permissions)
      }
    }
  }
}
