package streamjoin.operator;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rdd.RDD;
import org.apache.spark.rdd.UnionRDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The queries' rows of a batch written into their Parquet sinks in one job, by the tasks that
 * make them, where each query's rows are an RDD's (a probe's, a chain's) as they are, or a plan
 * of an RDD's rows: a shared join's member, its condition and SELECT over the join's rows
 * ({@link BatchInput#output}). The outputs of one RDD are written in one pass over its rows, so
 * a shared join's rows are made once and never kept. A write each would be a Spark job each
 * (a DataFrame write also analyses and plans a command), and with many queries those jobs, not
 * the joins, would take a batch's time. Files as {@link BatchWrite}'s. Written for janino: no
 * lambdas, raw collections.
 */
public final class JointWrite {
  private JointWrite() {}

  /** Whether the tasks that make {@code rows} can write them: an RDD's rows ({@link
   * BatchWrite#rddOf}), in a session whose settings ask nothing of Spark's writer alone ({@link
   * BatchWrite#sparksOwn}). */
  public static boolean takes(Dataset rows) {
    SQLConf sql = rows.sparkSession().sessionState().conf();
    return BatchWrite.rddOf(rows) != null && !BatchWrite.sparksOwn(sql);
  }

  /**
   * Writes output i, the rows of {@code rows[i]} through {@code plans[i]} (null: as they are),
   * into directory {@code dirs[i]}, which it replaces, as Parquet with sink options {@code
   * options[i]}, all in one job; returns the rows each wrote, joined by commas, -1 for an
   * output it left to Spark's writer: rows that are not an RDD's ({@link BatchWrite#rddOf}), a
   * plan bound to another layout, two columns of the same name (Spark's writer names them), or
   * every output where the session's settings ask for Spark's writer ({@link
   * BatchWrite#sparksOwn}).
   */
  public static String parquet(List rows, List plans, List dirs, List options, long batch)
      throws IOException {
    int n = rows.size();
    long[] written = new long[n];
    java.util.Arrays.fill(written, -1L);
    SparkSession spark = ((Dataset) rows.get(0)).sparkSession();
    SQLConf sql = spark.sessionState().conf();
    if (BatchWrite.sparksOwn(sql)) {
      return joined(written);
    }
    Map set = CollectionConverters.asJava(sql.getAllConfs());
    ArrayList rdds = new ArrayList();
    int[] source = new int[n];
    BatchWrite[] writers = new BatchWrite[n];
    for (int i = 0; i < n; i++) {
      Dataset d = (Dataset) rows.get(i);
      BatchInput plan = (BatchInput) plans.get(i);
      RDD rdd = BatchWrite.rddOf(d);
      source[i] = -1;
      if (rdd == null || (plan != null && !plan.schema.equals(d.schema()))) {
        continue;
      }
      // (Every column nullable, as Spark writes a file source: a sink's files agree whichever
      // way each batch was written.)
      StructType schema = (plan == null ? d.schema() : plan.layout).asNullable();
      if (BatchWrite.duplicated(schema, sql.caseSensitiveAnalysis())) {
        continue;
      }
      writers[i] = BatchWrite.prepare(spark, set, (Map) options.get(i), schema);
      int at = -1;  // (a shared join's members: one RDD, read once)
      for (int g = 0; g < rdds.size() && at < 0; g++) {
        at = BatchWrite.sameRows((RDD) rdds.get(g), rdd) ? g : -1;
      }
      if (at < 0) {
        at = rdds.size();
        rdds.add(rdd);
      }
      source[i] = at;
      written[i] = 0;
    }
    if (rdds.isEmpty()) {
      return joined(written);
    }
    int[] first = new int[rdds.size() + 1];
    for (int g = 0; g < rdds.size(); g++) {
      first[g + 1] = first[g] + ((RDD) rdds.get(g)).getNumPartitions();
    }
    RDD all = (RDD) rdds.get(0);
    if (rdds.size() > 1) {
      all = new UnionRDD(
          spark.sparkContext(), CollectionConverters.asScala(rdds).toSeq(), PlainRdd.ANY);
    }
    Task task = new Task(spark, writers, plans, dirs, source, first, batch);
    ArrayList mine = new ArrayList();  // (the directories this job writes)
    Configuration conf = null;
    for (int i = 0; i < n; i++) {
      if (source[i] >= 0) {
        mine.add(dirs.get(i));
        conf = writers[i].conf;
      }
    }
    List parts = BatchWrite.written(all.toJavaRDD(), task, mine, conf);
    for (int p = 0; p < parts.size(); p++) {
      long[] got = (long[]) parts.get(p);
      for (int i = 0; i < n; i++) {
        written[i] += got[i];
      }
    }
    return joined(written);
  }

  /** The task that writes each partition's rows, as they are, into directory {@code dir} with
   * writer {@code w} alone, as batch {@code batch}'s files (a buffer's units: {@link
   * GroupRows}), its RDD's partitions numbered from {@code first} in the job's union. */
  static Task task(SparkSession spark, BatchWrite w, String dir, long batch, int first) {
    java.util.List none = new ArrayList();
    none.add(null);
    java.util.List dirs = new ArrayList();
    dirs.add(dir);
    return new Task(
        spark, new BatchWrite[] {w}, none, dirs, new int[] {0},
        new int[] {first, Integer.MAX_VALUE}, batch);
  }

  static String joined(long[] written) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < written.length; i++) {
      out.append(i == 0 ? "" : ",").append(written[i]);
    }
    return out.toString();
  }

  /** One task's partition of one RDD written into a file per output of that RDD that its rows
   * reach (the RDD's first partition writes one for every output, so that an output without
   * rows still has a file that carries its schema, as Spark's writer leaves). Returns the rows
   * it wrote per output. */
  static final class Task implements FlatMapFunction {
    final String[] keys;
    final Broadcast[] shipped;
    final BatchInput[] plans;
    final String[] dirs;
    final int[] source;  // (per output, its RDD)
    final int[] first;  // (per RDD, its first partition in the union; then their count)
    final long batch;

    Task(
        SparkSession spark,
        BatchWrite[] writers,
        List plans,
        List dirs,
        int[] source,
        int[] first,
        long batch) {
      int n = writers.length;
      keys = new String[n];
      shipped = new Broadcast[n];
      this.plans = new BatchInput[n];
      this.dirs = new String[n];
      for (int i = 0; i < n; i++) {
        if (writers[i] == null) {
          continue;  // (left to Spark's writer: its source is -1)
        }
        keys[i] = writers[i].key;
        shipped[i] = writers[i].ship(spark);
        this.plans[i] = (BatchInput) plans.get(i);
        this.dirs[i] = (String) dirs.get(i);
      }
      this.source = source;
      this.first = first;
      this.batch = batch;
    }

    public Iterator call(Object rows) throws Exception {
      // (The task's partition is the mapped RDD's: it is collected, the last of its stage.)
      TaskContext task = TaskContext.get();
      int at = task.partitionId();
      int g = 0;
      while (first[g + 1] <= at) {
        g++;
      }
      int part = at - first[g];
      int n = keys.length;
      ArrayList mine = new ArrayList();
      for (int i = 0; i < n; i++) {
        if (source[i] == g) {
          mine.add(Integer.valueOf(i));
        }
      }
      int m = mine.size();
      int[] of = new int[m];
      BatchWrite[] ws = new BatchWrite[m];
      for (int k = 0; k < m; k++) {
        of[k] = ((Integer) mine.get(k)).intValue();
        ws[k] = BatchWrite.of(keys[of[k]], shipped[of[k]]);
      }
      // (The conditions of the members planned over one placeholder: one projection of a
      // boolean each, a class compiled per placeholder, not a predicate per member.)
      int[] group = new int[m];
      int[] slot = new int[m];
      ArrayList groups = new ArrayList();
      for (int k = 0; k < m; k++) {
        BatchInput plan = plans[of[k]];
        group[k] = -1;
        if (plan == null || plan.conditions[0] == null) {
          continue;
        }
        for (int c = 0; c < groups.size() && group[k] < 0; c++) {
          ArrayList members = (ArrayList) groups.get(c);
          if (plan.sameRows((BatchInput) members.get(0))) {
            group[k] = c;
          }
        }
        if (group[k] < 0) {
          group[k] = groups.size();
          groups.add(new ArrayList());
        }
        ArrayList members = (ArrayList) groups.get(group[k]);
        slot[k] = members.size();
        members.add(plan);
      }
      UnsafeProjection[] tested = new UnsafeProjection[groups.size()];
      for (int c = 0; c < tested.length; c++) {
        ArrayList members = (ArrayList) groups.get(c);
        if (members.size() > 1) {
          tested[c] = BatchInput.tests(
              (BatchInput[]) members.toArray(new BatchInput[members.size()]));
        }
      }
      BasePredicate[] tests = new BasePredicate[m];
      UnsafeProjection[] makes = new UnsafeProjection[m];
      for (int k = 0; k < m; k++) {
        if (plans[of[k]] != null) {
          // (A member alone over its placeholder: its own predicate.)
          boolean alone = group[k] < 0 || tested[group[k]] == null;
          Object[] made = plans[of[k]].made("write", 1, alone);
          tests[k] = ((BasePredicate[]) made[0])[0];
          makes[k] = ((UnsafeProjection[]) made[1])[0];
          if (alone) {
            group[k] = -1;
          }
        }
      }
      InternalRow[] held = new InternalRow[tested.length];
      long[] written = new long[n];
      BatchWrite.Out[] outs = new BatchWrite.Out[m];
      Iterator it = (Iterator) rows;
      try {
        for (int k = 0; part == 0 && k < m; k++) {
          outs[k] = new BatchWrite.Out(ws[k], dirs[of[k]], part, batch, task);
        }
        while (it.hasNext()) {
          InternalRow row = (InternalRow) it.next();
          for (int c = 0; c < tested.length; c++) {
            held[c] = tested[c] == null ? null : tested[c].apply(row);
          }
          for (int k = 0; k < m; k++) {
            InternalRow h = group[k] < 0 ? null : held[group[k]];
            if (h != null && (h.isNullAt(slot[k]) || !h.getBoolean(slot[k]))) {
              continue;
            }
            if (tests[k] != null && !tests[k].eval(row)) {
              continue;
            }
            if (outs[k] == null) {
              outs[k] = new BatchWrite.Out(ws[k], dirs[of[k]], part, batch, task);
            }
            outs[k].write(makes[k] == null ? row : makes[k].apply(row));
          }
        }
        for (int k = 0; k < m; k++) {
          if (outs[k] != null) {
            outs[k].commit();
            written[of[k]] = outs[k].rows;
          }
        }
      } catch (Throwable err) {
        for (int k = 0; k < m; k++) {
          if (outs[k] != null) {
            outs[k].abort(err);
          }
        }
        throw BatchWrite.rethrown(err);
      }
      return Collections.singletonList(written).iterator();
    }
  }
}
