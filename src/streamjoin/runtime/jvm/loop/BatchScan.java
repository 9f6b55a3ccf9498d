package streamjoin.loop;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.rdd.UnionRDD;
import org.apache.spark.sql.catalyst.FileSourceOptions;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.catalyst.trees.TreePattern$;
import org.apache.spark.sql.catalyst.expressions.AttributeMap$;
import org.apache.spark.sql.catalyst.plans.logical.Statistics;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.catalyst.types.DataTypeUtils$;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.Dataset$;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.execution.LogicalRDD$;
import scala.Option;
import scala.math.BigInt$;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.PartitionedFileUtil$;
import org.apache.spark.sql.execution.datasources.FileFormat$;
import org.apache.spark.sql.execution.datasources.FilePartition$;
import org.apache.spark.sql.execution.datasources.FileScanRDD;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Map$;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;
import streamjoin.operator.PlainRdd;

/**
 * The batches of a job's file streams, read without planning a query per batch: each stream's
 * file reader (Spark's own, for its format and options) and the projection of its rows into
 * the job's unified input are made once, from the plan of the unified input over the streams'
 * directories; a batch is then the given files of each stream, split as Spark splits them,
 * read by those readers and projected in its tasks (runtime/loop.py). Written for janino: no
 * lambdas, no generics.
 */
public final class BatchScan {
  final SparkSession spark;
  final StructType schema;
  final Source[] sources;

  BatchScan(SparkSession spark, StructType schema, Source[] sources) {
    this.spark = spark;
    this.schema = schema;
    this.sources = sources;
  }

  /** One stream: its relation, its reader, its projection, and its directory's listing. */
  static final class Source {
    final HadoopFsRelation relation;
    final scala.Function1 reader;
    final Projected projected;
    final FileSourceOptions options;
    final Path root;
    final HashSet seen = new HashSet();
    final HashMap listed = new HashMap();  // (path -> FileStatus, of the last listing)

    Source(HadoopFsRelation relation, scala.Function1 reader, Projected projected,
        FileSourceOptions options, Path root) {
      this.relation = relation;
      this.reader = reader;
      this.projected = projected;
      this.options = options;
      this.root = root;
    }
  }

  /** The scan of {@code template}, the unified input of the job's streams (a union, in the
   * streams' order, of projections of file relations, each over an empty directory), whose
   * streams' directories are {@code dirs} (a line each); null when its optimised plan has
   * another shape, or a relation has partition columns, which a list of files does not give. */
  public static BatchScan of(Dataset template, String dirs) {
    String[] roots = dirs.split("\n");
    // (The optimiser fixes the time of current_timestamp() and the like: once here, where
    // Spark's loop takes each batch's. Nondeterministic columns would repeat by partition.)
    LogicalPlan analysed = template.queryExecution().analyzed();
    if (analysed.containsPattern(TreePattern$.MODULE$.CURRENT_LIKE())
        || !analysed.deterministic()) {
      return null;
    }
    LogicalPlan plan = template.queryExecution().optimizedPlan();
    List parts = plan instanceof Union
        ? CollectionConverters.asJava(((Union) plan).children())
        : Arrays.asList(new Object[] {plan});
    SparkSession spark = (SparkSession) template.sparkSession();
    if (roots.length != parts.size()) {
      return null;
    }
    Source[] sources = new Source[parts.size()];
    for (int i = 0; i < sources.length; i++) {
      Object part = parts.get(i);
      if (!(part instanceof Project) || !(((Project) part).child() instanceof LogicalRelation)) {
        return null;
      }
      Project project = (Project) part;
      LogicalRelation leaf = (LogicalRelation) project.child();
      if (!(leaf.relation() instanceof HadoopFsRelation)) {
        return null;
      }
      HadoopFsRelation rel = (HadoopFsRelation) leaf.relation();
      if (rel.partitionSchema().nonEmpty()) {
        return null;
      }
      scala.collection.immutable.Map options = (scala.collection.immutable.Map) rel.options().updated(
          FileFormat$.MODULE$.OPTION_RETURNING_BATCH(), "false");
      scala.Function1 reader = rel.fileFormat().buildReaderWithPartitionValues(
          spark, rel.dataSchema(), rel.partitionSchema(), rel.dataSchema(),
          scala.collection.immutable.Nil$.MODULE$, options,
          spark.sessionState().newHadoopConfWithOptions(rel.options()));
      Path root = new Path(roots[i]);
      Projected projected = new Projected(project.projectList(), leaf.output());
      sources[i] = new Source(rel, reader, projected, new FileSourceOptions(rel.options()), root);
    }
    return new BatchScan(spark, template.schema(), sources);
  }

  /** Files of stream {@code i} already read: never offered again. */
  public void seen(int i, String paths) {
    String[] lines = paths.split("\n");
    for (int j = 0; j < lines.length; j++) {
      if (lines[j].length() > 0) {
        sources[i].seen.add(lines[j]);
      }
    }
  }

  /** Whether this class is on the driver's class path (py4j: a class it cannot find is a
   * package, and calling it fails). */
  public static boolean available() {
    return true;
  }

  /** The files under stream {@code i}'s directory not read yet, oldest first (by modification
   * time, then path, as Spark's file source takes them): a line each, length, a tab, the
   * qualified path. As Spark lists a directory: files in subdirectories too, none whose name
   * starts with {@code _} or {@code .} or ends with {@code ._COPYING_} (a copy under way); a
   * partition directory ({@code key=value}), whose value would be a column, is an error. */
  public String poll(int i) throws IOException {
    Source s = sources[i];
    FileSystem fs = s.root.getFileSystem(spark.sparkContext().hadoopConfiguration());
    s.listed.clear();
    List fresh = new ArrayList();
    List dirs = new ArrayList();
    dirs.add(s.root);
    while (!dirs.isEmpty()) {
      FileStatus[] found = fs.listStatus((Path) dirs.remove(dirs.size() - 1));
      for (int j = 0; j < found.length; j++) {
        String name = found[j].getPath().getName();
        String path = found[j].getPath().toString();
        if (name.startsWith("_") || name.startsWith(".") || name.endsWith("._COPYING_")) {
          continue;
        }
        if (found[j].isDirectory()) {
          if (name.contains("=")) {
            throw new IOException("it holds the partition directory " + path
                + ", whose value the engine's loop would not read as a column: set"
                + " streamjoin.loop = spark for a new checkpoint");
          }
          dirs.add(found[j].getPath());
        } else if (!s.seen.contains(path)) {
          s.listed.put(path, found[j]);
          fresh.add(found[j]);
        }
      }
    }
    fresh.sort(new Oldest());
    StringBuilder out = new StringBuilder();
    for (int j = 0; j < fresh.size(); j++) {
      FileStatus f = (FileStatus) fresh.get(j);
      out.append(f.getLen()).append('\t').append(f.getPath().toString()).append('\n');
    }
    return out.toString();
  }

  static final class Oldest implements Comparator {
    public int compare(Object a, Object b) {
      FileStatus x = (FileStatus) a;
      FileStatus y = (FileStatus) b;
      int c = Long.compare(x.getModificationTime(), y.getModificationTime());
      return c != 0 ? c : x.getPath().toString().compareTo(y.getPath().toString());
    }
  }

  /** Batch {@code id} of {@code spec} (a line per file: its stream's index, a tab, its path), as
   * a DataFrame of rows Spark planned in the unified input's layout; its files are then read
   * (never offered again). A file not in its stream's last listing is looked up. The calling
   * thread's jobs are described as the batch's in Spark's UI from here on. */
  public Dataset batch(long id, String spec) throws IOException {
    spark.sparkContext().setJobDescription("streamjoin batch " + id);
    List[] files = new List[sources.length];
    for (int i = 0; i < files.length; i++) {
      files[i] = new ArrayList();
    }
    String[] lines = spec.split("\n");
    for (int j = 0; j < lines.length; j++) {
      int tab = lines[j].indexOf('\t');
      if (tab > 0) {
        int i = Integer.parseInt(lines[j].substring(0, tab));
        files[i].add(lines[j].substring(tab + 1));
      }
    }
    List rdds = new ArrayList();
    List streams = new ArrayList();
    long[] bytes = new long[1];
    for (int i = 0; i < sources.length; i++) {
      if (!files[i].isEmpty()) {
        rdds.add(read(sources[i], files[i], bytes));
        streams.add(Integer.valueOf(i));
      }
    }
    RDD rows = rdds.size() == 1
        ? (RDD) rdds.get(0)
        : new UnionRDD(spark.sparkContext(), CollectionConverters.asScala(rdds).toList(),
            ClassTag$.MODULE$.apply(InternalRow.class));
    // (Which stream each partition holds: a plan of some streams reads only theirs.)
    int[] streamOf = new int[rows.getNumPartitions()];
    int at = 0;
    for (int k = 0; k < rdds.size(); k++) {
      int n = ((RDD) rdds.get(k)).getNumPartitions();
      java.util.Arrays.fill(streamOf, at, at + n, ((Integer) streams.get(k)).intValue());
      at += n;
    }
    streamjoin.operator.BatchStreams.note(rows, streamOf);
    return rowsOf(rows, bytes[0]);
  }

  /** {@code rows} as a DataFrame whose plan is of rows Spark planned, sized by their files
   * as a file scan is (Spark's own DataFrame of an RDD counts as too large to broadcast). */
  Dataset rowsOf(RDD rows, long bytes) {
    LogicalRDD$ rdd = LogicalRDD$.MODULE$;
    scala.collection.immutable.Seq output = DataTypeUtils$.MODULE$.toAttributes(schema);
    Partitioning parts = rdd.apply$default$3();
    scala.collection.immutable.Seq order = rdd.apply$default$4();
    Option none = Option.empty();
    double factor = spark.sessionState().conf().fileCompressionFactor();
    Statistics stats = new Statistics(
        BigInt$.MODULE$.apply(Math.max(1L, (long) (bytes * factor))), none,
        AttributeMap$.MODULE$.empty(), false);
    LogicalRDD plan = rdd.apply(output, rows, parts, order, false, none, spark,
        Option.apply(stats), none, rdd.apply$default$10(output, rows, parts, order, false, none));
    return Dataset$.MODULE$.ofRows(spark, plan);
  }

  RDD read(Source s, List paths, long[] bytes) throws IOException {
    FileSystem fs = s.root.getFileSystem(spark.sparkContext().hadoopConfiguration());
    List statuses = new ArrayList();
    for (int j = 0; j < paths.size(); j++) {
      String path = (String) paths.get(j);
      FileStatus st = (FileStatus) s.listed.get(path);
      if (st == null) {
        st = fs.getFileStatus(new Path(path));
      }
      s.seen.add(path);
      bytes[0] += st.getLen();
      statuses.add(new FileStatusWithMetadata(st, Map$.MODULE$.empty()));
    }
    scala.collection.immutable.Seq all = CollectionConverters.asScala(statuses).toList();
    PartitionDirectory dir = new PartitionDirectory(InternalRow.empty(), all);
    long maxSplit = FilePartition$.MODULE$.maxSplitBytes(
        spark, CollectionConverters.asScala(Arrays.asList(new Object[] {dir})).toList());
    List split = new ArrayList();
    for (int j = 0; j < statuses.size(); j++) {
      FileStatusWithMetadata f = (FileStatusWithMetadata) statuses.get(j);
      // (Per file: a compressed one, say, is read whole.)
      boolean splitable = s.relation.fileFormat().isSplitable(
          spark, s.relation.options(), f.getPath());
      split.addAll(CollectionConverters.asJava(PartitionedFileUtil$.MODULE$.splitFiles(
          f, f.getPath(), splitable, maxSplit, InternalRow.empty())));
    }
    split.sort(new Largest());
    scala.collection.immutable.Seq partitions = FilePartition$.MODULE$.getFilePartitions(
        spark, CollectionConverters.asScala(split).toList(), maxSplit);
    FileScanRDD scan = new FileScanRDD(
        spark, s.reader, partitions, s.relation.dataSchema(),
        scala.collection.immutable.Nil$.MODULE$, Map$.MODULE$.empty(), s.options);
    return PlainRdd.mapPartitions(scan.toJavaRDD(), s.projected).rdd();
  }

  /** Largest split first, as Spark's file scan orders them before packing partitions. */
  static final class Largest implements Comparator {
    public int compare(Object a, Object b) {
      return Long.compare(
          ((org.apache.spark.sql.execution.datasources.PartitionedFile) b).length(),
          ((org.apache.spark.sql.execution.datasources.PartitionedFile) a).length());
    }
  }

  /** A stream's rows projected into the unified layout, the projection made once per task
   * thread. */
  static final class Projected implements FlatMapFunction, Serializable {
    final Object expressions;  // (a Seq of NamedExpression)
    final Object input;  // (the Seq of Attribute they read)
    final String id = java.util.UUID.randomUUID().toString();
    static final ConcurrentHashMap MADE = new ConcurrentHashMap();

    Projected(Object expressions, Object input) {
      this.expressions = expressions;
      this.input = input;
    }

    public Iterator call(Object rows) {
      String key = id + "/" + Thread.currentThread().getId();
      UnsafeProjection make = (UnsafeProjection) MADE.get(key);
      if (make == null) {
        make = UnsafeProjection$.MODULE$.create(
            (scala.collection.immutable.Seq) expressions, (scala.collection.immutable.Seq) input);
        if (MADE.size() > 1024) {
          MADE.clear();
        }
        MADE.put(key, make);
      }
      make.initialize(0);
      return new Rows((Iterator) rows, make);
    }
  }

  static final class Rows implements Iterator {
    final Iterator rows;
    final UnsafeProjection make;

    Rows(Iterator rows, UnsafeProjection make) {
      this.rows = rows;
      this.make = make;
    }

    public boolean hasNext() {
      return rows.hasNext();
    }

    public Object next() {
      return make.apply((InternalRow) rows.next());
    }
  }
}
