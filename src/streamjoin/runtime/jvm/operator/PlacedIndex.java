package streamjoin.operator;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.ExecutorAllocationClient;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.util.CollectionAccumulator;

/**
 * {@link JoinIndex}'s partitions kept on the executors of a cluster. Each partition lives in the
 * memory of one executor, its owner; every job that reads or changes it (its load from the
 * committed units, a batch's probe, its drop) is one task per partition that prefers the owner
 * (Spark's process-local placement, through a placement RDD zipped with the rows shuffled by
 * the index's hash); the pairs leave the probe's tasks through a shuffle. A task that runs elsewhere, the owner lost or too busy, finds no partition
 * of that name and fails: the batch then fails and is run again on an index rebuilt under a new
 * name (the driver's part). The expiry runs in the probe's task of each partition, since the
 * driver holds none. Written for janino: no lambdas, raw collections.
 */
public final class PlacedIndex {
  private PlacedIndex() {}

  /** This executor as Spark's scheduler names a place: {@code executor_<host>_<id>}. */
  static String here() {
    BlockManagerId id = SparkEnv.get().blockManager().blockManagerId();
    return "executor_" + id.host() + "_" + id.executorId();
  }

  /** The executors whose block managers the driver knows now and that its scheduler holds
   * active, named as {@link #here} names them (the driver left out): the places a build can
   * prefer. (An executor killed as it starts can register its block manager after the
   * scheduler let it go: the block managers alone would then name a place no task runs on.) */
  public static String[] executors(SparkSession spark) {
    scala.collection.Iterator ids =
        spark.sparkContext().env().blockManager().master().getMemoryStatus().keysIterator();
    Object backend = spark.sparkContext().schedulerBackend();
    ExecutorAllocationClient scheduler =
        backend instanceof ExecutorAllocationClient ? (ExecutorAllocationClient) backend : null;
    ArrayList out = new ArrayList();
    while (ids.hasNext()) {
      BlockManagerId id = (BlockManagerId) ids.next();
      boolean active = scheduler == null || scheduler.isExecutorActive(id.executorId());
      if (!id.isDriver() && active) {
        out.add("executor_" + id.host() + "_" + id.executorId());
      }
    }
    return (String[]) out.toArray(new String[0]);
  }

  /** {@code parts} partitions, partition p holding p and preferring {@code owners[p]} (none
   * given, or null: anywhere). */
  static JavaRDD placement(SparkSession spark, int parts, String[] owners) {
    ArrayList items = new ArrayList();
    for (int p = 0; p < parts; p++) {
      ArrayList at = new ArrayList();
      if (owners != null && p < owners.length && owners[p] != null) {
        at.add(owners[p]);
      }
      items.add(new scala.Tuple2(Integer.valueOf(p), seq(at)));
    }
    return spark
        .sparkContext()
        .makeRDD(seq(items), scala.reflect.ClassTag$.MODULE$.apply(Integer.class))
        .toJavaRDD();
  }

  static scala.collection.immutable.Seq seq(List items) {
    return scala.jdk.javaapi.CollectionConverters.asScala(items).toList();
  }

  /** Loads committed rows {@code in} into new partitions of {@code name} at batch {@code
   * version}, each on the executor its task ran on (preferring {@code owners}, may be null):
   * one Spark job; returns each partition's owner. With an outer join's {@code marker} (else
   * null), as {@link JoinIndex#load}: the pairs among the rows mark them, and each side's rows
   * below {@code leftDecided} and {@code rightDecided} are decided already. */
  public static String[] load(
      Dataset in,
      String name,
      int parts,
      long version,
      String[] owners,
      BatchInput marker,
      long leftDecided,
      long rightDecided,
      long memory) {
    SparkSession spark = (SparkSession) in.sparkSession();
    JavaRDD rows = IndexRows.shuffled(in, parts);
    PlacedLoad f = new PlacedLoad(name, parts, version, IndexRows.shuffledFields(in.schema()));
    f.memory = memory;
    f.marker = marker;
    f.decided = new long[] {leftDecided, rightDecided};
    List placed = PlainRdd.collect(placement(spark, parts, owners).zipPartitions(rows, f));
    String[] out = new String[parts];
    for (int i = 0; i < placed.size(); i++) {
      scala.Tuple2 t = (scala.Tuple2) placed.get(i);
      out[((Integer) t._1()).intValue()] = (String) t._2();
    }
    return out;
  }

  /** The candidate pairs of batch {@code batch}'s delta {@code in}, each partition's rows
   * probed on its owner after its rows below {@code leftLeast} and {@code rightLeast} go (lazy:
   * the job that reads the pairs runs it); with an outer join's {@code marker} (else null), the
   * pairs that meet it mark their rows, each copy of a row its own ({@link #decide} joins their
   * marks). {@code output}, {@code shed} and {@code units} as {@link JoinIndex#probe}'s: the
   * counts, and the rows each partition holds after the probe, come back to the driver with
   * the tasks (an accumulator, {@link #gather}), for {@link JoinIndex#unitCounts} and {@link
   * JoinIndex#sizes}. {@code identified}: the rows stored carry their identities (an outer
   * join's index beside one that drains: {@link #drain}'s matches veto their decisions). With
   * {@code alone} (else null; then {@code output} is not), an outer join's rows without a
   * partner below {@code leftBelow} and {@code rightBelow} (the least long: none), decided by
   * each partition's task once its probe has marked them, as {@link JoinIndex#probeBatch}'s
   * task decides them: only where each row lies in one partition (no copies, no drain beside,
   * so no veto can come from elsewhere; else {@link #decide} after the probe). */
  public static Dataset probe(
      Dataset in,
      BatchInput output,
      BatchInput marker,
      BatchInput alone,
      long leftBelow,
      long rightBelow,
      String shed,
      String name,
      int parts,
      long batch,
      int units,
      long leftLeast,
      long rightLeast,
      String[] owners,
      boolean identified) {
    SparkSession spark = (SparkSession) in.sparkSession();
    JavaRDD rows = IndexRows.shuffled(in, parts);
    int[] fields = IndexRows.shuffledFields(in.schema());
    IndexProbe probe = JoinIndex.probing(fields, output, shed, name, parts, batch, units);
    probe.marker = marker;
    probe.keepsCounts = false;
    probe.marksInJvm = false;  // (a row's copies on other executors: `decide`'s vetoes)
    probe.identified = identified;
    if (alone != null) {
      if (SharedMarks.used(marker, fields) || identified || output == null) {
        throw new IllegalArgumentException("streamjoin: " + name + "'s rows without a partner"
            + " have copies, or no output, and cannot be decided in its probe's tasks");
      }
      probe.alone = alone;
      probe.below = new long[] {leftBelow, rightBelow};
    }
    PlacedProbe f = new PlacedProbe(name, leftLeast, rightLeast, probe, owners);
    if (units > 0 || probe.cuts != null) {  // (read by ProbeCounts.read: else none)
      f.counted = spark.sparkContext().collectionAccumulator();
      COUNTED.put(name + "@" + batch, f.counted);
    }
    return onOwners(in, rows, f, output, parts, owners);
  }

  /** The pairs {@code f} finds in the partitions of {@code owners}, each probed by its rows of
   * {@code rows} ({@code in}'s, shuffled) on its owner. */
  static Dataset onOwners(
      Dataset in, JavaRDD rows, PlacedProbe f, BatchInput output, int parts, String[] owners) {
    SparkSession spark = (SparkSession) in.sparkSession();
    JavaRDD pairs = placement(spark, parts, owners).zipPartitions(rows, f);
    // (A shuffle after the probe: what reads the pairs, a sink's coalesce or a union of
    // queries, may put several partitions in one task, which no one executor could run.)
    StructType out = output == null ? JoinIndex.pairsSchema(in.schema()) : output.layout;
    return spark.internalCreateDataFrame(pairs.rdd(), out, false).repartition(parts);
  }

  /** {@link #probe} of an index that drains ({@link IndexProbe#drains}, as {@link
   * JoinIndex#drain}): the pairs of the batch's rows {@code in}, placed as the index placed its
   * rows, with those rows, each partition probed on its owner after its rows below {@code
   * leftLeast} and {@code rightLeast} go; nothing is added to it and nothing counted. With an
   * outer join's {@code marker} (else null), a pair that meets it marks the drained row where
   * it lies, and the batch's row of a side the join preserves (bit 0 of {@code preserved}: the
   * left, bit 1: the right), stored in the new index {@code into} on other executors, is sent
   * back to the driver: it vetoes that row's decision ({@link DrainVetoes}). */
  public static Dataset drain(
      Dataset in,
      BatchInput output,
      BatchInput marker,
      String name,
      int parts,
      long batch,
      long leftLeast,
      long rightLeast,
      String[] owners,
      String into,
      int preserved) {
    SparkSession spark = (SparkSession) in.sparkSession();
    JavaRDD rows = IndexRows.shuffled(in, parts);
    IndexProbe probe =
        new IndexProbe(name, parts, batch, IndexRows.shuffledFields(in.schema()), 0, output);
    probe.drains = true;
    probe.keepsCounts = false;
    PlacedProbe f = new PlacedProbe(name, leftLeast, rightLeast, probe, owners);
    if (marker != null) {
      if (into == null) {
        throw new IllegalArgumentException("streamjoin: an outer join's drain of " + name
            + " has no index beside it for its vetoes");
      }
      probe.marker = marker;
      probe.marksInJvm = false;  // (the drained row's copies keep their own marks)
      probe.sendsMet = preserved;
      f.met = spark.sparkContext().collectionAccumulator();
      DrainVetoes.expect(into, f.met);
    }
    return onOwners(in, rows, f, output, parts, owners);
  }

  /** Per probe {@code name + "@" + batch} on the executors, in the driver: the accumulator its
   * tasks add their counts to, as (partition, counts or null, rows the partition holds). */
  static final java.util.concurrent.ConcurrentHashMap COUNTED =
      new java.util.concurrent.ConcurrentHashMap();

  /** The counts that the tasks of probe {@code name + "@" + batch} sent back, by partition (a
   * task or stage run again sends the same partition's again: the last stands), or null where
   * no such probe ran on the executors; forgotten once read. */
  static java.util.Map gather(String name, long batch) {
    CollectionAccumulator counted = (CollectionAccumulator) COUNTED.remove(name + "@" + batch);
    if (counted == null) {
      return null;
    }
    java.util.HashMap out = new java.util.HashMap();
    java.util.HashMap held = new java.util.HashMap();
    long spilled = 0;
    List sent = counted.value();
    for (int i = 0; i < sent.size(); i++) {
      scala.Tuple3 t = (scala.Tuple3) sent.get(i);
      if (t._2() != null) {
        out.put(t._1(), t._2());
      }
      long[] rows = (long[]) t._3();
      held.put(t._1(), Long.valueOf(rows[0]));
      spilled += rows[1];
    }
    HELD.put(name, held);
    SPILLED.put(name, Long.valueOf(spilled));
    return out;
  }

  /** Per index name on the executors, in the driver: the live rows its partitions had
   * spilled after the last probe whose counts were read ({@link #gather}). */
  static final java.util.concurrent.ConcurrentHashMap SPILLED =
      new java.util.concurrent.ConcurrentHashMap();

  /** Per index name on the executors, in the driver: the rows each partition held after the
   * last probe whose counts were read ({@link #gather}), by partition. */
  static final java.util.concurrent.ConcurrentHashMap HELD =
      new java.util.concurrent.ConcurrentHashMap();

  /** {@link JoinIndex#decide} of partitions on their owners: the rows of side {@code side}
   * below event time {@code below} that no partner matched, decided by batch {@code batch}, as
   * pairs of {@code in}'s layout (lazy: one task per partition, on its owner). Where a row has
   * copies in several partitions ({@code in} places them, or an OR's tables), each pair
   * carries the row's identity ({@code _sj_id}), and a copy that a partner matched adds a pair
   * of that identity with the row NULL: the row is alone where none such is. */
  public static Dataset decide(
      Dataset in, String name, int side, long below, long batch, String[] owners) {
    SparkSession spark = (SparkSession) in.sparkSession();
    int[] fields = IndexRows.shuffledFields(in.schema());
    Decide f = new Decide(name, side, below, batch, owners);
    f.vetoed = DrainVetoes.take(name, side, below);
    f.tabbed = fields[IndexRows.TAB] >= 0;
    f.vetoes = fields[IndexRows.STORES] >= 0 || f.tabbed;
    JavaRDD rows = placement(spark, owners.length, owners).mapPartitions(f);
    StructType pairs = JoinIndex.pairsSchema(in.schema());
    if (f.vetoes) {
      pairs = pairs.add("_sj_id", org.apache.spark.sql.types.DataTypes.LongType, false);
    }
    return spark.internalCreateDataFrame(rows.rdd(), pairs, false);
  }

  /** {@link JoinIndex#buckets} of partitions on their owners: one job. */
  public static String buckets(SparkSession spark, String name, int step, String[] owners) {
    Sample f = new Sample(name, step, owners);
    List got = PlainRdd.collect(placement(spark, owners.length, owners).mapPartitions(f));
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < got.size(); i++) {
      String part = (String) got.get(i);
      if (!part.isEmpty()) {
        text.append(text.length() == 0 ? "" : ",").append(part);
      }
    }
    return text.toString();
  }

  static final class Sample implements FlatMapFunction {
    final String name;
    final int step;
    final String[] owners;

    Sample(String name, int step, String[] owners) {
      this.name = name;
      this.step = step;
      this.owners = owners;
    }

    public Iterator call(Object placed) {
      int p = partOf((Iterator) placed);
      IndexPart part = owned(name, p, owners);
      StringBuilder text = new StringBuilder();
      synchronized (part) {
        part.sample(step, text);
      }
      ArrayList out = new ArrayList();
      out.add(text.toString());
      return out.iterator();
    }
  }

  /** Forgets the partitions of {@code name} on their owners (one job; a partition whose task
   * runs elsewhere stays until its executor ends). */
  public static void drop(SparkSession spark, String name, String[] owners) {
    ProbeCounts.forget(COUNTED, name);  // (a failed batch's, never read)
    DrainVetoes.forget(name);
    HELD.remove(name);
    SPILLED.remove(name);
    placement(spark, owners.length, owners).foreachPartition(new Drop(name));
  }

  /** The partition a task of a placement RDD was given. */
  static int partOf(Iterator placed) {
    return ((Integer) placed.next()).intValue();
  }

  /** Partition {@code p} of {@code name}, where this task runs on its owner; else the error
   * that makes the batch run again on partitions built again. */
  static IndexPart owned(String name, int p, String[] owners) {
    if (!here().equals(owners[p])) {
      // (A copy elsewhere, a build task's attempt that failed after it loaded, is stale.)
      throw new IllegalStateException(
          "streamjoin: no index for " + name + " partition " + p + " on " + here()
              + ": its owner is " + owners[p]);
    }
    return JoinIndex.part(name, p);
  }

  static final class Decide implements FlatMapFunction {
    final String name;
    final int side;
    final long below;
    final long batch;
    final String[] owners;
    boolean tabbed;
    boolean vetoes;
    long[] vetoed;  // (rows a drained row matched: {@link DrainVetoes#take})

    Decide(String name, int side, long below, long batch, String[] owners) {
      this.name = name;
      this.side = side;
      this.below = below;
      this.batch = batch;
      this.owners = owners;
    }

    public Iterator call(Object placed) {
      int p = partOf((Iterator) placed);
      IndexPart part = owned(name, p, owners);
      ArrayList rows = new ArrayList();
      java.util.Set marks = null;
      if (vetoed != null && vetoed.length > 0) {
        marks = new java.util.HashSet();
        for (int i = 0; i < vetoed.length; i++) {
          marks.add(Long.valueOf(vetoed[i]));
        }
      }
      synchronized (part) {
        OuterMarks.aloneIn(part, side, below, batch, marks, tabbed, rows, vetoes);
      }
      return rows.iterator();
    }
  }

  static final class Drop implements VoidFunction {
    final String name;

    Drop(String name) {
      this.name = name;
    }

    public void call(Object placed) {
      JoinIndex.closed(JoinIndex.PARTS.remove(name + "/" + partOf((Iterator) placed)));
    }
  }
}
