package streamjoin.operator;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.api.python.PythonUtils;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rdd.RDD;
import org.apache.spark.rdd.UnionRDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Repartition;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.execution.datasources.DataSourceUtils;
import org.apache.spark.sql.execution.datasources.OutputWriter;
import org.apache.spark.sql.execution.datasources.OutputWriterFactory;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.SerializableConfiguration;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A sink's Parquet writer, prepared once with Spark's own writer factory, and the files its
 * tasks write: each task's partition to one file under a hidden name, renamed into place, so a
 * reader never sees part of a file; the directory is replaced first, as an overwrite is. On a
 * cluster the writer goes to the executors once, as a broadcast. Who writes with it: {@link
 * JointWrite} (the queries' rows of a batch, in one job) and {@link GroupRows} (a buffer's
 * units). Written for janino: no lambdas, raw collections.
 */
public final class BatchWrite {
  final String key;
  final OutputWriterFactory factory;
  final Configuration conf;
  final StructType schema;
  Broadcast shipped;  // (the writer for other JVMs' tasks, made once per context: `ship`)
  org.apache.spark.SparkContext shippedBy;

  BatchWrite(String key, OutputWriterFactory factory, Configuration conf, StructType schema) {
    this.key = key;
    this.factory = factory;
    this.conf = conf;
    this.schema = schema;
  }

  /** Prepared writers by options and schema: the same sink's batches share one, and its tasks
   * find it here rather than in their closure, which would carry all of Hadoop's configuration
   * to every task. An executor's JVM keeps the ones its tasks took from a broadcast. */
  static final ConcurrentHashMap PREPARED = new ConcurrentHashMap();

  /** What an executor's task makes this writer of: sent once per writer, as a broadcast. */
  static final class Shipped implements java.io.Serializable {
    final OutputWriterFactory factory;
    final SerializableConfiguration conf;
    final StructType schema;

    Shipped(OutputWriterFactory factory, Configuration conf, StructType schema) {
      this.factory = factory;
      this.conf = new SerializableConfiguration(conf);
      this.schema = schema;
    }
  }

  /** The broadcast of this writer for {@code spark}'s executors, made on first use (from the
   * driver), again for another context; null where the tasks run in the driver's JVM (a local
   * master: they find the writer in {@link #PREPARED}). */
  synchronized Broadcast ship(SparkSession spark) {
    org.apache.spark.SparkContext context = spark.sparkContext();
    if (context.isLocal()) {
      return null;
    }
    if (shipped == null || shippedBy != context) {
      shipped = JavaSparkContext.fromSparkContext(context).broadcast(
          new Shipped(factory, conf, schema));
      shippedBy = context;
    }
    return shipped;
  }

  /** The writer of {@code key} in this JVM: the driver's, or one made from its broadcast. */
  static BatchWrite of(String key, Broadcast shipped) {
    BatchWrite w = (BatchWrite) PREPARED.get(key);
    if (w == null) {
      Shipped s = (Shipped) shipped.value();
      w = kept(new BatchWrite(key, s.factory, s.conf.value(), s.schema));
    }
    return w;
  }

  /** {@code w} in {@link #PREPARED}, or the writer of its key another thread put first. */
  static BatchWrite kept(BatchWrite w) {
    Object had = PREPARED.putIfAbsent(w.key, w);
    return had == null ? w : (BatchWrite) had;
  }

  /** The RDD whose rows {@code rows} are, or null where they are not an RDD's (their plan is
   * not a {@code LogicalRDD}, nor a union of such), or it has no partitions (Spark's writer
   * still writes a file that carries the schema). Rows repartitioned from an RDD's are that
   * RDD's partitions: the same rows (a placed probe's pairs are shuffled only for readers that
   * would put several of its partitions in one task). A union's RDD is its parts' partitions
   * side by side (an index's probe beside the one of the index that drains: each task writes
   * what it finds, where it finds it). */
  static RDD rddOf(Dataset rows) {
    RDD rdd = rddOf(rows.logicalPlan());
    return rdd == null || rdd.getNumPartitions() == 0 ? null : rdd;
  }

  static RDD rddOf(LogicalPlan plan) {
    if (plan instanceof Repartition && ((Repartition) plan).shuffle()) {
      plan = ((Repartition) plan).child();
    }
    if (plan instanceof LogicalRDD) {
      return ((LogicalRDD) plan).rdd();
    }
    if (!(plan instanceof Union) || ((Union) plan).byName()) {
      return null;
    }
    ArrayList parts = new ArrayList();
    scala.collection.Iterator children = plan.children().iterator();
    while (children.hasNext()) {
      RDD part = rddOf((LogicalPlan) children.next());
      if (part == null) {
        return null;
      }
      parts.add(part);
    }
    // (A plain union: each part's partitions keep their own tasks and owners.)
    RDD first = (RDD) parts.get(0);
    return new UnionRDD(first.context(), CollectionConverters.asScala(parts).toSeq(), PlainRdd.ANY);
  }

  /** Whether {@code a} and {@code b} are the same rows: one RDD, or unions ({@link #rddOf}) of
   * the same RDDs (a shared join's members each ask for the union of its rows). */
  static boolean sameRows(RDD a, RDD b) {
    // (Scala's Seq equality compares the elements; an RDD's equals is its identity.)
    return a == b
        || (a instanceof UnionRDD
            && b instanceof UnionRDD
            && ((UnionRDD) a).rdds().equals(((UnionRDD) b).rdds()));
  }

  /** Whether the session's settings {@code sql} ask for what only Spark's writer does: files
   * of at most so many rows, another commit protocol or committer. */
  static boolean sparksOwn(SQLConf sql) {
    Object committer = sql.getConfString("spark.sql.parquet.output.committer.class", null);
    return sql.maxRecordsPerFile() > 0
        || !PROTOCOL.equals(sql.fileCommitProtocolClass())
        || (committer != null && !COMMITTER.equals(committer));
  }

  /** The writer of rows of {@code schema} with {@code options} under the session's Parquet
   * settings ({@code set}: all of the session's), prepared once and kept in {@link #PREPARED}. */
  static BatchWrite prepare(SparkSession spark, Map set, Map options, StructType schema)
      throws IOException {
    // (The session's Parquet settings, which the prepared writer took, are in its key.)
    TreeMap parquet = new TreeMap();
    Iterator it = set.entrySet().iterator();
    while (it.hasNext()) {
      Map.Entry e = (Map.Entry) it.next();
      String k = (String) e.getKey();
      if (k.contains("parquet") || k.equals("spark.sql.session.timeZone")) {
        parquet.put(k, e.getValue());
      }
    }
    String key = options + "\0" + parquet + "\0" + schema.json();
    BatchWrite w = (BatchWrite) PREPARED.get(key);
    if (w == null) {
      scala.collection.immutable.Map opts = PythonUtils.toScalaMap(options);
      Job job = Job.getInstance(spark.sessionState().newHadoopConfWithOptions(opts));
      ParquetFileFormat format = new ParquetFileFormat();
      DataSourceUtils.verifySchema(format, schema, false);
      OutputWriterFactory f = format.prepareWrite(spark, job, opts, schema);
      w = kept(new BatchWrite(key, f, job.getConfiguration(), schema));  // (sinks run at once)
    }
    return w;
  }

  static final String PROTOCOL =
      "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol";
  static final String COMMITTER = "org.apache.parquet.hadoop.ParquetOutputCommitter";

  static boolean duplicated(StructType schema, boolean caseSensitive) {
    java.util.HashSet names = new java.util.HashSet();
    String[] fields = schema.fieldNames();
    for (int i = 0; i < fields.length; i++) {
      String name = caseSensitive ? fields[i] : fields[i].toLowerCase(java.util.Locale.ROOT);
      if (!names.add(name)) {
        return true;
      }
    }
    return false;
  }

  /** What each task {@code f} returns, having written {@code rdd}'s partitions into the
   * directories {@code dirs} (on {@code conf}'s file systems), which it replaces first; each
   * gets Spark's committer's {@code _SUCCESS} once every task is done. A null {@code f}: the
   * partitions of {@code rdd} write themselves and return what each task returns. */
  static List written(
      org.apache.spark.api.java.JavaRDD rdd, FlatMapFunction f, List dirs, Configuration conf)
      throws IOException {
    for (int i = 0; i < dirs.size(); i++) {
      Path path = new Path((String) dirs.get(i));
      FileSystem fs = path.getFileSystem(conf);
      fs.delete(path, true);
      fs.mkdirs(path);
    }
    List results = PlainRdd.collect(f == null ? rdd : PlainRdd.mapPartitions(rdd, f));
    for (int i = 0; i < dirs.size(); i++) {
      Path path = new Path((String) dirs.get(i));
      path.getFileSystem(conf).create(new Path(path, "_SUCCESS"), true).close();
    }
    return results;
  }

  /** One task's file of one output: written under a hidden name of its attempt and renamed
   * into place once whole, so a reader never sees part of a file, and a retried task never
   * meets the one a failed attempt left (which {@link #abort} deletes where it can). */
  static final class Out {
    final FileSystem fs;
    final Path hidden;
    final Path target;
    OutputWriter writer;
    long rows;

    Out(BatchWrite w, String dir, int part, long batch, TaskContext task) throws IOException {
      Configuration c = w.conf;
      TaskAttemptID id = new TaskAttemptID("streamjoin", (int) batch, TaskType.MAP, part, 0);
      TaskAttemptContextImpl ctx = new TaskAttemptContextImpl(c, id);
      String name = "part-" + String.format("%05d", new Object[] {Integer.valueOf(part)})
          + "-b" + batch + w.factory.getFileExtension(ctx);
      // (Unique in the application: a stage resubmitted numbers its attempts from 0 again.)
      long attempt = task.taskAttemptId();
      hidden = new Path(dir, "." + name + "." + attempt + ".writing");
      target = new Path(dir, name);
      fs = hidden.getFileSystem(c);
      try {
        writer = w.factory.newInstance(hidden.toString(), w.schema, ctx);
      } catch (Throwable err) {
        abort(err);
        throw rethrown(err);
      }
    }

    void write(InternalRow row) {
      writer.write(row);
      rows++;
    }

    void commit() throws IOException {
      OutputWriter closing = writer;
      writer = null;
      closing.close();
      fs.delete(target, false);  // (an earlier attempt's)
      if (!fs.rename(hidden, target)) {
        throw new IOException("streamjoin: could not rename " + hidden + " to " + target);
      }
    }

    /** After {@code err}: the file closed and deleted, what failed doing so added to it. */
    void abort(Throwable err) {
      if (writer != null) {
        try {
          writer.close();
        } catch (Throwable e) {
          err.addSuppressed(e);
        }
        writer = null;
      }
      try {
        fs.delete(hidden, false);
      } catch (Throwable e) {
        err.addSuppressed(e);
      }
    }
  }

  /** {@code err} to throw on: an Error is thrown as it is (by the caller's throw). */
  static Exception rethrown(Throwable err) {
    if (err instanceof Error) {
      throw (Error) err;
    }
    return err instanceof Exception ? (Exception) err : new RuntimeException(err);
  }
}
