package streamjoin.operator;

import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

/**
 * The bytes of a run of an {@link IndexSide}'s rows, slots {@code first} to {@code end}, moved
 * out of the heap into a file of the executor's local directory (Spark's {@code
 * spark.local.dir}) when the JVM's partitions hold more than their memory budget. The slots keep their
 * keys, times and marks in memory; a probe that reaches one reads its row back from the file,
 * mapped into memory (the operating system's page cache holds what is read often, off the
 * heap). Each record: the row's field count, its size, its bytes (Spark's UnsafeRow layout).
 * The file goes when its last row expires, or its partition is dropped. Written for janino.
 */
final class SpillFile {
  // (A file is mapped whole, and a mapping holds at most 2 GiB.)
  static final long MOST_BYTES = 1L << 30;
  int first;
  int end;
  final File file;
  final MappedByteBuffer bytes;

  SpillFile(int first, int end, File file, MappedByteBuffer bytes) {
    this.first = first;
    this.end = end;
    this.file = file;
    this.bytes = bytes;
  }

  /** Writes the UnsafeRows among {@code rows[first..end)} to a new file, recording where each
   * one lies in {@code at}; the others (none as the operator stores rows) stay in memory. */
  static SpillFile write(InternalRow[] rows, int first, int end, long[] at) {
    File file = null;
    try {
      file = File.createTempFile("streamjoin-spill-", ".rows", directory());
      DataOutputStream out =
          new DataOutputStream(new BufferedOutputStream(new FileOutputStream(file), 1 << 16));
      long pos = 0;
      try {
        for (int i = first; i < end; i++) {
          if (!(rows[i] instanceof UnsafeRow)) {
            continue;
          }
          UnsafeRow u = (UnsafeRow) rows[i];
          byte[] b = u.getBytes();
          at[i] = pos;
          out.writeInt(u.numFields());
          out.writeInt(b.length);
          out.write(b);
          pos += 8 + b.length;
        }
      } finally {
        out.close();
      }
      if (pos > Integer.MAX_VALUE) {  // (spillTo writes at most MOST_BYTES of rows a file)
        throw new IOException("a spill file of " + pos + " bytes: more than one mapping holds");
      }
      FileChannel channel = FileChannel.open(file.toPath(), new StandardOpenOption[] {
        StandardOpenOption.READ});
      MappedByteBuffer mapped;
      try {
        mapped = channel.map(FileChannel.MapMode.READ_ONLY, 0L, pos);
      } finally {
        channel.close();  // (the mapping stays valid)
      }
      return new SpillFile(first, end, file, mapped);
    } catch (IOException e) {
      if (file != null) {
        file.delete();
      }
      throw new IllegalStateException(
          "streamjoin: could not spill the join operator's rows to " + directory() + ": " + e, e);
    }
  }

  /** The row written at {@code at}, read back into a heap copy of its own. */
  UnsafeRow read(long at) {
    int pos = (int) at;
    int fields = bytes.getInt(pos);
    int size = bytes.getInt(pos + 4);
    byte[] b = new byte[size];
    bytes.get(pos + 8, b, 0, size);
    UnsafeRow row = new UnsafeRow(fields);
    row.pointTo(b, size);
    return row;
  }

  /** Unmaps and deletes the file. Its side's lock is held: no read of it runs or follows
   * (a row read is a copy, and the side forgets the file first). */
  void close() {
    unmap(bytes);
    file.delete();
  }

  /** Unmaps {@code b} now, not when the collector finds it: the file's disk space and the
   * process's count of mappings are freed with it. Where the JVM offers no way
   * (sun.misc.Unsafe's cleaner), the collector unmaps it. */
  static void unmap(MappedByteBuffer b) {
    try {
      java.lang.reflect.Field f = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
      f.setAccessible(true);
      Object unsafe = f.get(null);
      java.lang.reflect.Method clean =
          unsafe.getClass().getMethod("invokeCleaner", new Class[] {java.nio.ByteBuffer.class});
      clean.invoke(unsafe, new Object[] {b});
    } catch (Exception e) {
      return;  // (left to the collector)
    }
  }

  /** Where spills go: the executor's first local directory, else Java's temporary one. */
  static File directory() {
    org.apache.spark.SparkEnv env = org.apache.spark.SparkEnv.get();
    String dir =
        env == null
            ? System.getProperty("java.io.tmpdir")
            : org.apache.spark.util.Utils.getLocalDir(env.conf());
    File d = new File(dir, "streamjoin-spill");
    d.mkdirs();
    return d;
  }
}
