package streamjoin.operator;

import java.io.Serializable;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.rdd.PartitionPruningRDD$;
import org.apache.spark.rdd.RDD;

/**
 * Which stream each partition of a batch's rows holds, where the engine's own loop made them
 * (a scan per stream, their union: {@code loop.BatchScan}), so that a plan of some streams'
 * rows ({@link BatchInput}) reads only those streams' files: a job of several joins over
 * different streams would otherwise read every stream's files once per join. Rows made
 * another way (Spark's loop) are read whole. Written for janino: no lambdas, no generics.
 */
public final class BatchStreams {
  private BatchStreams() {}

  /** A batch's RDD (the object: ids start again in a new SparkContext of the same JVM) →
   * the stream of each of its partitions; an RDD no batch holds any more goes with it. */
  static final java.util.Map OF =
      java.util.Collections.synchronizedMap(new java.util.WeakHashMap());

  /** Partitions left unread so far (a test reads it). */
  static final AtomicLong PRUNED = new AtomicLong();

  /** Partition p of {@code rows} holds stream {@code streamOf[p]}'s rows. */
  public static void note(RDD rows, int[] streamOf) {
    OF.put(rows, streamOf);
  }

  /** The partitions left unread so far. */
  public static long pruned() {
    return PRUNED.get();
  }

  /** {@code rows}, a batch's, with only the partitions of {@code streams} (null: all), where
   * its streams are known; at least one partition, so that a task still runs. */
  static RDD of(RDD rows, int[] streams) {
    int[] of = streams == null ? null : (int[]) OF.get(rows);
    if (of == null || of.length != rows.getNumPartitions()) {
      return rows;
    }
    boolean[] keep = new boolean[of.length];
    int kept = 0;
    for (int p = 0; p < of.length; p++) {
      for (int s = 0; s < streams.length && !keep[p]; s++) {
        keep[p] = of[p] == streams[s];
      }
      kept += keep[p] ? 1 : 0;
    }
    if (kept == of.length) {
      return rows;
    }
    PRUNED.addAndGet(of.length - kept);
    if (kept == 0) {  // (no rows of these streams: one empty partition, so a task still runs)
      return org.apache.spark.api.java.JavaSparkContext.fromSparkContext(rows.sparkContext())
          .parallelize(new java.util.ArrayList(), 1).rdd();
    }
    return PartitionPruningRDD$.MODULE$.create(rows, new Kept(keep));
  }

  /** The union of the streams of {@code inputs} (null where one reads every stream). */
  static int[] union(BatchInput[] inputs) {
    java.util.TreeSet all = new java.util.TreeSet();
    for (int i = 0; i < inputs.length; i++) {
      if (inputs[i].streams == null) {
        return null;
      }
      for (int s = 0; s < inputs[i].streams.length; s++) {
        all.add(Integer.valueOf(inputs[i].streams[s]));
      }
    }
    int[] out = new int[all.size()];
    int at = 0;
    java.util.Iterator it = all.iterator();
    while (it.hasNext()) {
      out[at++] = ((Integer) it.next()).intValue();
    }
    return out;
  }

  static final class Kept extends scala.runtime.AbstractFunction1 implements Serializable {
    final boolean[] keep;

    Kept(boolean[] keep) {
      this.keep = keep;
    }

    public Object apply(Object partition) {
      return Boolean.valueOf(keep[((Integer) partition).intValue()]);
    }
  }
}
