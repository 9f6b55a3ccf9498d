package streamjoin.operator;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The live state of two-way equi and band joins as hash indexes in the executor's memory, kept
 * across micro-batches: one per query and shuffle partition (a band join's: one), each side's
 * rows by the hash of their key (a band join's: by their value's bucket), and in arrival order
 * for expiry. A batch's delta is shuffled by the same hash (or, when small, put in one task);
 * each task probes and extends the partitions it has rows of (the delta rule: new left rows meet
 * old and new right rows, new right rows meet old left rows) and returns the candidate pairs,
 * which the query's whole predicate then filters in Spark SQL. The probe can also count the
 * delta's rows per unit of the skew check ({@link #unitCounts}). Rows stay in Spark's internal
 * form (the shuffle's rows, copied): no conversion to and from external rows, which cost a
 * generated (de)serializer per batch and two conversions per row. What a row becomes in an index,
 * and which partition it goes to, is {@link IndexRows}'s.
 *
 * <p>Input rows: {@code _sj_side} (0 left, 1 right), {@code _sj_key} (a 64-bit hash of the key
 * values; NULL: a NULL key, which meets nothing), {@code _sj_ts} (event time in microseconds, or
 * NULL), {@code _sj_l} and {@code _sj_r} (the row, as a struct on its side's column). A row's
 * partition is computed from its key as Spark's shuffle computed it, never taken from the task:
 * operators after the probe (a union of several queries' pairs, the sink's coalesce) number
 * their tasks otherwise. Each partition records the last batch applied to it: a batch run again
 * (a retried task, a batch rerun after a failure) first takes back the rows it added. Written
 * for Spark's own Java compiler (janino): no lambdas, raw collections.
 */
public final class JoinIndex {
  private JoinIndex() {}

  /** Index {@code name}'s rows keep their marks in the shared marks ({@link SharedMarks}), as
   * an index that drains beside it marks its rows too. */
  public static void shareMarks(String name) {
    SharedMarks.share(name);
  }

  /** Index {@code name}'s new rows no longer need shared marks ({@link SharedMarks#unshare}). */
  public static void unshareMarks(String name) {
    SharedMarks.unshare(name);
  }

  /** The delta's rows per unit that the probe of batch {@code batch} of {@code name} counted,
   * and a shedding probe's pairs after them ({@link ProbeCounts#read}). */
  public static String unitCounts(String name, long batch, int units) {
    return ProbeCounts.read(name, batch, units);
  }

  static final ConcurrentHashMap PARTS = new ConcurrentHashMap();

  static IndexPart part(String name, int p) {
    IndexPart part = (IndexPart) PARTS.get(name + "/" + p);
    if (part == null) {
      throw new IllegalStateException("streamjoin: no index for " + name + " partition " + p);
    }
    return part;
  }


  /** Drops, in every partition of {@code name}, the rows below {@code leftLeast} (left) and
   * {@code rightLeast} (right): no row of the batch about to run can meet them. */
  public static void expire(String name, int parts, long leftLeast, long rightLeast) {
    java.util.Set marks = SharedMarks.of(name, false);
    for (int p = 0; p < parts; p++) {
      IndexPart part = part(name, p);
      synchronized (part) {
        part.expire(leftLeast, rightLeast, marks);
      }
    }
  }

  /** Empty indexes for {@code name} in {@code parts} partitions, at batch {@code version},
   * sharing with every partition in this JVM {@code memory} bytes of state in memory, rows and
   * slots ({@link IndexPart#budget}). */
  public static void reset(String name, int parts, long version, long memory) {
    drop(name);
    for (int p = 0; p < parts; p++) {
      PARTS.put(name + "/" + p, new IndexPart(version, memory));
    }
  }

  /** Forgets every partition of {@code name} (their spill files deleted), and its counts not
   * read. */
  public static void drop(String name) {
    SharedMarks.drop(name);
    Iterator it = PARTS.entrySet().iterator();
    while (it.hasNext()) {
      java.util.Map.Entry e = (java.util.Map.Entry) it.next();
      if (((String) e.getKey()).startsWith(name + "/")) {
        it.remove();
        closed(e.getValue());
      }
    }
    ProbeCounts.forget(ProbeCounts.COUNTS, name);
  }

  /** Deletes the spill files of partition {@code part} (may be null), which has left PARTS. */
  static void closed(Object part) {
    if (part != null) {
      IndexPart p = (IndexPart) part;
      synchronized (p) {
        p.close();
      }
    }
  }

  /** Live rows the partitions of {@code name} spilled to disk, both sides: those in this JVM,
   * or on a cluster's executors as their last probe whose counts were read sent them. */
  public static long spilled(String name) {
    Object sent = PlacedIndex.SPILLED.get(name);
    if (sent != null) {
      return ((Long) sent).longValue();
    }
    long n = 0;
    ArrayList parts = partsOf(name);
    for (int i = 0; i < parts.size(); i++) {
      IndexPart part = (IndexPart) parts.get(i);
      synchronized (part) {
        n += part.spilledRows();
      }
    }
    return n;
  }

  /** The partitions of {@code name} this JVM holds. */
  static ArrayList partsOf(String name) {
    ArrayList out = new ArrayList();
    Iterator it = PARTS.entrySet().iterator();
    while (it.hasNext()) {
      java.util.Map.Entry e = (java.util.Map.Entry) it.next();
      if (((String) e.getKey()).startsWith(name + "/")) {
        out.add(e.getValue());
      }
    }
    return out;
  }

  /** Every {@code step}-th row's bucket (a band's own, by its value) that the partitions of
   * {@code name} this JVM holds keep, both sides, comma-separated (one string for one call
   * from Python): a sample of the band values, for range partitioning's bounds. */
  public static String buckets(String name, int parts, int step) {
    StringBuilder text = new StringBuilder();
    for (int p = 0; p < parts; p++) {
      IndexPart part = (IndexPart) PARTS.get(name + "/" + p);
      if (part != null) {
        synchronized (part) {
          part.sample(step, text);
        }
      }
    }
    return text.toString();
  }

  /** Rows each partition of {@code name} holds, both sides, comma-separated (one string for
   * one call from Python); 0 for a partition it does not have. Partitions on a cluster's
   * executors: as their last probe whose counts were read sent them ({@link PlacedIndex#HELD}). */
  public static String sizes(String name, int parts) {
    StringBuilder text = new StringBuilder();
    java.util.Map held = (java.util.Map) PlacedIndex.HELD.get(name);
    for (int p = 0; p < parts; p++) {
      IndexPart part = held == null ? (IndexPart) PARTS.get(name + "/" + p) : null;
      long n = 0;
      if (part != null) {
        synchronized (part) {
          n = part.size();
        }
      } else if (held != null && held.get(Integer.valueOf(p)) != null) {
        n = ((Long) held.get(Integer.valueOf(p))).longValue();
      }
      text.append(p == 0 ? "" : ",").append(n);
    }
    return text.toString();
  }

  /** Rows held by the partitions of {@code name}, both sides. */
  public static long rows(String name) {
    long n = 0;
    ArrayList parts = partsOf(name);
    for (int i = 0; i < parts.size(); i++) {
      n += ((IndexPart) parts.get(i)).size();
    }
    return n;
  }


  /** Loads committed rows into the (reset) indexes of {@code name}: one Spark job. With an
   * outer join's {@code marker} (else null), the rows loaded are applied as one batch, so that
   * the pairs among them mark their rows matched, and each side's rows below {@code
   * leftDecided} and {@code rightDecided} are decided already. */
  public static void load(
      Dataset in, String name, int parts, BatchInput marker, long leftDecided, long rightDecided) {
    IndexLoad f = new IndexLoad(name, parts, IndexRows.shuffledFields(in.schema()), marker);
    IndexRows.shuffled(in, parts).foreachPartition(f);
    if (marker != null) {
      for (int p = 0; p < parts; p++) {
        IndexPart part = part(name, p);
        synchronized (part) {
          part.decidedBefore(leftDecided, rightDecided);
        }
      }
    }
  }

  /** The rows of side {@code side} of {@code name}'s partitions below event time {@code
   * below} that no partner matched, decided by batch {@code batch} (a rerun of it decides the
   * same ones), as pairs ({@code in}'s pairs, the other side NULL): an outer join's rows
   * without a partner. For a driver whose JVM holds the partitions (a local master). */
  public static Dataset decide(
      Dataset in, String name, int parts, int side, long below, long batch) {
    boolean tabbed = java.util.Arrays.asList(in.schema().fieldNames()).contains("_sj_tab");
    ArrayList rows = OuterMarks.alone(name, parts, side, below, batch, tabbed);
    SparkSession spark = (SparkSession) in.sparkSession();
    org.apache.spark.rdd.RDD rdd =
        spark
            .sparkContext()
            .parallelize(
                scala.jdk.javaapi.CollectionConverters.asScala(rows).toSeq(),
                1,
                scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class));
    return spark.internalCreateDataFrame(rdd, pairsSchema(in.schema()), false);
  }

  /** The candidate pairs of batch {@code batch}'s delta {@code in} (lazy: the job that reads
   * them applies the batch to the partitions it has rows of), or with {@code output} (else
   * null) the query's rows of those it keeps, made in the probe's tasks. {@code units} above 0: count
   * the delta's rows per unit of the skew check ({@link #unitCounts}). {@code oneTask}: one
   * task applies every partition's rows, with no shuffle (a partition's rows of a batch must
   * all be in one task: a second would take back the first's as a rerun's). */
  public static Dataset probe(
      Dataset in,
      BatchInput output,
      BatchInput marker,
      String shed,
      String name,
      int parts,
      long batch,
      int units,
      boolean oneTask) {
    JavaRDD rows = oneTask ? IndexRows.together(in) : IndexRows.shuffled(in, parts);
    SparkSession spark = (SparkSession) in.sparkSession();
    int[] fields = oneTask ? IndexRows.fields(in.schema()) : IndexRows.shuffledFields(in.schema());
    IndexProbe f = probing(fields, output, shed, name, parts, batch, units);
    f.marker = marker;
    return made(spark, rows, f, output == null ? pairsSchema(in.schema()) : output.layout);
  }

  /** {@link #probe} of an index that drains ({@link IndexProbe#drains}): the pairs of the
   * batch's rows {@code in}, placed as the index placed its rows, with those rows; nothing is
   * added to it and nothing counted. With an outer join's {@code marker} (else null), a pair
   * that meets it marks the index's row, and the batch's row in the shared marks of index
   * {@code into}, the new one it is stored in ({@link #shareMarks}). */
  public static Dataset drain(
      Dataset in,
      BatchInput output,
      BatchInput marker,
      String name,
      int parts,
      long batch,
      boolean oneTask,
      String into) {
    JavaRDD rows = oneTask ? IndexRows.together(in) : IndexRows.shuffled(in, parts);
    SparkSession spark = (SparkSession) in.sparkSession();
    int[] fields = oneTask ? IndexRows.fields(in.schema()) : IndexRows.shuffledFields(in.schema());
    IndexProbe f = new IndexProbe(name, parts, batch, fields, 0, output);
    f.drains = true;
    f.marker = marker;
    f.marksInto = into;
    return made(spark, rows, f, output == null ? pairsSchema(in.schema()) : output.layout);
  }

  /** Gives the partitions of {@code from} the name {@code to} (an index that drains). */
  public static void rename(String from, String to, int parts) {
    drop(to);
    for (int p = 0; p < parts; p++) {
      Object part = PARTS.remove(from + "/" + p);
      if (part != null) {
        PARTS.put(to + "/" + p, part);
      }
    }
    SharedMarks.rename(from, to);  // (an outer join's: its rows' marks go with them)
    ProbeCounts.forget(ProbeCounts.COUNTS, from);
  }

  /** The candidate pairs of a probe whose input is {@code in}'s layout, none of them: what a
   * query's {@link BatchInput#output} is planned over. */
  public static Dataset nopairs(Dataset in) {
    SparkSession spark = (SparkSession) in.sparkSession();
    org.apache.spark.rdd.RDD none =
        spark.sparkContext().emptyRDD(scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class));
    return spark.internalCreateDataFrame(none, pairsSchema(in.schema()), false);
  }

  /** {@link #probe} of a micro-batch's own rows {@code rows} made into the probe's input by
   * {@code input}, in one task, leaving out rows behind {@code lateBefore}; with {@code
   * output} (else null), the pairs it keeps, made into its rows in the task; with {@code
   * marker} (else null), an outer join's ON condition, which marks the rows it matches; with
   * {@code alone} (else null; then {@code output} is not), its rows without a partner, made of
   * the rows of each preserved side below {@code leftBelow} and {@code rightBelow} (the least
   * long: none) that no partner matched, decided in the task once its probe has marked them
   * (a rerun of the batch decides the same; {@link #decide}). */
  public static Dataset probeBatch(
      BatchInput input,
      BatchInput output,
      BatchInput marker,
      BatchInput alone,
      long leftBelow,
      long rightBelow,
      Dataset rows,
      long lateBefore,
      String shed,
      String name,
      int parts,
      long batch,
      int units) {
    SparkSession spark = (SparkSession) rows.sparkSession();
    JavaRDD in = input.rows(rows, lateBefore);
    IndexProbe f = probing(IndexRows.fields(input.layout), output, shed, name, parts, batch, units);
    f.marker = marker;
    f.alone = alone;
    f.below = new long[] {leftBelow, rightBelow};
    return made(spark, in, f, output == null ? pairsSchema(input.layout) : output.layout);
  }

  /** The probe of batch {@code batch} of an input whose {@code fields} are given. {@code
   * shed}: empty, or shedding's cuts of the left and the right side and whether the pairs of
   * the rows that skip their probe are counted ({@code "cutL,cutR,count"}; {@link
   * IndexProbe#cuts}), whose counts follow the units' in {@link #unitCounts}. */
  static IndexProbe probing(
      int[] fields, BatchInput output, String shed, String name, int parts, long batch, int units) {
    ProbeCounts.COUNTS.remove(name + "@" + batch);  // (an earlier attempt's, if the batch runs again)
    IndexProbe f = new IndexProbe(name, parts, batch, fields, units, output);
    if (shed != null && !shed.isEmpty()) {
      String[] given = shed.split(",");
      f.cuts = new long[] {Long.parseLong(given[0]), Long.parseLong(given[1])};
      f.countMissed = "count".equals(given[2]);
    }
    return f;
  }

  /** The rows probe {@code f} makes of {@code rows}, of columns {@code out}. */
  static Dataset made(SparkSession spark, JavaRDD rows, IndexProbe f, StructType out) {
    return spark.internalCreateDataFrame(PlainRdd.mapPartitions(rows, f).rdd(), out, false);
  }

  /** The candidate pairs' columns of a probe whose input has columns {@code s}. */
  static StructType pairsSchema(StructType s) {
    StructField l = nullable(s, "_sj_l");
    StructField r = nullable(s, "_sj_r");
    if (!java.util.Arrays.asList(s.fieldNames()).contains("_sj_tab")) {
      return new StructType(new StructField[] {l, r});
    }
    // (An OR of equalities: the table a pair was found in, which decides whether it is kept.)
    StructField tab = new StructField("_sj_tab", DataTypes.IntegerType, false, Metadata.empty());
    return new StructType(new StructField[] {l, r, tab});
  }

  static StructField nullable(StructType s, String name) {
    StructField f = s.apply(name);
    return new StructField(name, f.dataType(), true, f.metadata());
  }


}
