package streamjoin.operator;

import java.util.ArrayList;
import java.util.Iterator;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.LogicalRDD;

/**
 * A multi-way query's chain of {@link JoinIndex} levels probed with a micro-batch's own rows in
 * one task, in the driver's JVM: each level's new input rows are made from the batch's rows by
 * its {@link BatchInput} (the first level's both sides, a later level's its one input), and
 * each level's output makes, of the pairs its probe keeps, the next level's new left rows (the
 * last level's: the query's rows). The batch's rows are read once and nothing is planned per
 * batch. Written for janino: no lambdas, raw collections.
 */
public final class ChainProbe implements FlatMapFunction {
  final BatchInput[] inputs;
  final BatchInput[] outputs;
  final String[] names;
  final int[] parts;
  final String[] sheds;  // (per level, a shedding query's cuts: JoinIndex#probing; "": none)
  final long batch;
  final long lateBefore;

  ChainProbe(
      BatchInput[] inputs,
      BatchInput[] outputs,
      String[] names,
      int[] parts,
      String[] sheds,
      long batch,
      long lateBefore) {
    this.inputs = inputs;
    this.outputs = outputs;
    this.names = names;
    this.parts = parts;
    this.sheds = sheds;
    this.batch = batch;
    this.lateBefore = lateBefore;
  }

  /** The query's rows of batch {@code batch}'s rows {@code rows} (a foreachBatch RDD: {@link
   * BatchInput#fits}) through the levels {@code names} (each of {@code parts} partitions,
   * expired and built beforehand), lazy: the job that reads them applies the batch to every
   * level. Rows behind {@code lateBefore} (their event time, microseconds) are left out. A
   * shedding query's rows probe each level by its {@code sheds} (per level: {@link
   * JoinIndex#probing}), and the level counts each side's pairs as a probe does. */
  public static Dataset probe(
      Dataset rows,
      BatchInput[] inputs,
      BatchInput[] outputs,
      String[] names,
      int[] parts,
      String[] sheds,
      long batch,
      long lateBefore) {
    SparkSession spark = (SparkSession) rows.sparkSession();
    LogicalRDD plan = (LogicalRDD) rows.queryExecution().logical();
    JavaRDD one = BatchStreams.of(plan.rdd(), BatchStreams.union(inputs)).toJavaRDD().coalesce(1);
    for (int n = 0; n < names.length; n++) {
      ProbeCounts.COUNTS.remove(names[n] + "@" + batch);  // (as a probe: an earlier attempt's)
    }
    ChainProbe f = new ChainProbe(inputs, outputs, names, parts, sheds, batch, lateBefore);
    BatchInput last = outputs[outputs.length - 1];
    return spark.internalCreateDataFrame(
        PlainRdd.mapPartitions(one, f).rdd(), last.layout, false);
  }

  public Iterator call(Object rows) {
    ArrayList batchRows = new ArrayList();  // (read once, each level's input made of them)
    Iterator it = (Iterator) rows;
    while (it.hasNext()) {
      batchRows.add(((InternalRow) it.next()).copy());  // (a scan may reuse its row)
    }
    int levels = names.length;
    ArrayList[] fresh = new ArrayList[levels];
    for (int n = 0; n < levels; n++) {
      Object[] made = inputs[n].made("chain", inputs[n].conditions.length);
      Iterator sides =
          new BatchInput.Sides(
              batchRows.iterator(),
              (BasePredicate[]) made[0],
              (UnsafeProjection[]) made[1],
              lateBefore);
      fresh[n] = new ArrayList();
      while (sides.hasNext()) {
        fresh[n].add(((InternalRow) sides.next()).copy());  // (the projection reuses its row)
      }
    }
    ArrayList carried = new ArrayList();
    for (int n = 0; n < levels; n++) {
      ArrayList delta = fresh[n];
      delta.addAll(carried);  // (the level before's new combinations: its new left rows)
      int[] fields = IndexRows.fields(inputs[n].layout);
      IndexProbe f =
          JoinIndex.probing(fields, outputs[n], sheds[n], names[n], parts[n], batch, 0);
      Iterator found = f.call(delta.iterator());
      if (n == levels - 1) {
        return found;
      }
      carried = new ArrayList();
      while (found.hasNext()) {
        carried.add(found.next());  // (copies: BatchInput#project)
      }
    }
    return carried.iterator();
  }
}
