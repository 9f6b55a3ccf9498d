package streamjoin;

import java.io.IOException;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.api.python.PythonUtils;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.execution.datasources.DataSourceUtils;
import org.apache.spark.sql.execution.datasources.OutputWriter;
import org.apache.spark.sql.execution.datasources.OutputWriterFactory;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.StructType;

/**
 * A batch's rows of a Parquet sink written by the tasks that make them, with Spark's own Parquet
 * writer, where the rows are an RDD's (a {@link JoinIndex} probe's): one RDD job, where a
 * DataFrame write analyses, optimises and plans a command, and runs Hadoop's commit protocol,
 * every batch. Each task writes its partition under a hidden name and renames it into place, so
 * a reader never sees part of a file; the directory is replaced first, as an overwrite is.
 * Written for janino: no lambdas, raw collections.
 */
public final class BatchWrite {
  final String key;
  final OutputWriterFactory factory;
  final Configuration conf;
  final StructType schema;

  BatchWrite(String key, OutputWriterFactory factory, Configuration conf, StructType schema) {
    this.key = key;
    this.factory = factory;
    this.conf = conf;
    this.schema = schema;
  }

  /** Prepared writers by options and schema: the same sink's batches share one, and its tasks
   * (in the driver's JVM, as the index's) find it here rather than in their closure, which
   * would carry all of Hadoop's configuration to every task. */
  static final ConcurrentHashMap PREPARED = new ConcurrentHashMap();

  /**
   * Writes {@code rows} into directory {@code dir} as Parquet with the sink's {@code options}
   * (Spark's, as {@code DataFrameWriter} takes them) and returns how many it wrote; or -1,
   * writing nothing, when {@code rows} are not an RDD's (their plan is not a {@code
   * LogicalRDD}).
   */
  public static long parquet(Dataset rows, String dir, long batch, Map options)
      throws IOException {
    LogicalPlan plan = rows.logicalPlan();
    if (!(plan instanceof LogicalRDD)) {
      return -1L;
    }
    SparkSession spark = rows.sparkSession();
    // (Every column nullable, as Spark writes a file source: a sink's files agree whichever
    // way each batch was written.)
    StructType schema = rows.schema().asNullable();
    String key = options.toString() + "\0" + schema.json();
    BatchWrite w = (BatchWrite) PREPARED.get(key);
    if (w == null) {
      scala.collection.immutable.Map opts = PythonUtils.toScalaMap(options);
      Job job = Job.getInstance(spark.sessionState().newHadoopConfWithOptions(opts));
      ParquetFileFormat format = new ParquetFileFormat();
      DataSourceUtils.verifySchema(format, schema, false);
      OutputWriterFactory f = format.prepareWrite(spark, job, opts, schema);
      w = new BatchWrite(key, f, job.getConfiguration(), schema);
      PREPARED.put(key, w);
    }
    return w.write(((LogicalRDD) plan).rdd().toJavaRDD(), dir, batch);
  }

  long write(org.apache.spark.api.java.JavaRDD rdd, String dir, long batch) throws IOException {
    Path path = new Path(dir);
    FileSystem fs = path.getFileSystem(conf);
    fs.delete(path, true);
    fs.mkdirs(path);
    List counts = rdd.mapPartitionsWithIndex(new Task(key, dir, batch), false).collect();
    long rows = 0;
    for (int i = 0; i < counts.size(); i++) {
      rows += ((Long) counts.get(i)).longValue();
    }
    fs.create(new Path(path, "_SUCCESS"), true).close();  // (as Spark's committer leaves it)
    return rows;
  }

  /** One task's partition written to one file (none for an empty partition but the first, so
   * that an empty batch still has a file that carries the schema, as Spark's writer leaves). */
  static final class Task implements Function2 {
    final String key;
    final String dir;
    final long batch;

    Task(String key, String dir, long batch) {
      this.key = key;
      this.dir = dir;
      this.batch = batch;
    }

    public Object call(Object index, Object rows) throws Exception {
      int part = ((Integer) index).intValue();
      Iterator it = (Iterator) rows;
      if (part > 0 && !it.hasNext()) {
        return Collections.singletonList(Long.valueOf(0L)).iterator();
      }
      BatchWrite w = (BatchWrite) PREPARED.get(key);
      Configuration c = w.conf;
      TaskAttemptID id = new TaskAttemptID("streamjoin", (int) batch, TaskType.MAP, part, 0);
      TaskAttemptContextImpl ctx = new TaskAttemptContextImpl(c, id);
      String name = "part-" + String.format("%05d", new Object[] {Integer.valueOf(part)})
          + "-b" + batch + w.factory.getFileExtension(ctx);
      Path hidden = new Path(dir, "." + name + ".writing");
      OutputWriter out = w.factory.newInstance(hidden.toString(), w.schema, ctx);
      long n = 0;
      try {
        while (it.hasNext()) {
          out.write((InternalRow) it.next());
          n++;
        }
      } catch (Throwable err) {
        try {
          out.close();
        } finally {
          hidden.getFileSystem(c).delete(hidden, false);
        }
        throw err instanceof Exception ? (Exception) err : new RuntimeException(err);
      }
      out.close();
      FileSystem fs = hidden.getFileSystem(c);
      Path target = new Path(dir, name);
      fs.delete(target, false);  // (an earlier attempt's)
      if (!fs.rename(hidden, target)) {
        throw new IOException("streamjoin: could not rename " + hidden + " to " + target);
      }
      return Collections.singletonList(Long.valueOf(n)).iterator();
    }
  }
}
