package streamjoin.operator;

import java.io.Serializable;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Predicate$;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection$;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.trees.TreePattern$;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.reflect.ClassTag$;

/**
 * A {@link JoinIndex} probe's input rows made from a micro-batch's own rows, the RDD that
 * Spark's foreachBatch planned, by expressions analysed and optimised once per query: a batch
 * then plans nothing for its input (no analysis, optimisation, code generation or file scan of
 * its own). One-sided, the same makes a query's rows of the probe's pairs ({@link #output}).
 * Each side is a filter and a projection of the batch's rows
 * into the probe's layout ({@code _sj_side, _sj_key, _sj_ts, _sj_l, _sj_r}) and the row's event
 * time, by which a row behind the batch's watermark (late) is left out. Written for janino: no
 * lambdas, no generics.
 */
public final class BatchInput implements Serializable {
  final Expression[] conditions;  // (per side; null: every row)
  final Object[] projections;  // (per side, a Seq of Expression)
  final Object[] inputs;  // (per side, the Seq of Attribute its expressions read)
  final StructType schema;
  final StructType layout;
  final String id = java.util.UUID.randomUUID().toString();  // (a task's copy keeps it)
  volatile int[] streams;  // (the streams whose rows it reads, by index; null: every one)

  /** Each task thread's predicates and projections of a BatchInput ({@link #made}), by its id,
   * its use and the thread: generating them took a fifth of a small batch's probe task. */
  static final ConcurrentHashMap MADE = new ConcurrentHashMap();

  BatchInput(
      Expression[] conditions,
      Object[] projections,
      Object[] inputs,
      StructType schema,
      StructType layout) {
    this.conditions = conditions;
    this.projections = projections;
    this.inputs = inputs;
    this.schema = schema;
    this.layout = layout;
  }

  /** Rows in the layout of {@code batch}, none of them: what a BatchInput is planned over. */
  public static Dataset placeholder(Dataset batch) {
    SparkSession spark = (SparkSession) batch.sparkSession();
    RDD none = spark.sparkContext().emptyRDD(ClassTag$.MODULE$.apply(InternalRow.class));
    return spark.internalCreateDataFrame(none, batch.schema(), false);
  }

  /** The input of plans {@code parts} (each side's, or with an OR of equalities each side's
   * copy for each table), each (once optimised) a projection of a filter of rows in one
   * layout; null where a plan has another shape, or an expression whose value may change from
   * one batch to the next. */
  public static BatchInput of(Dataset[] parts) {
    return plan(parts);
  }

  /** The output of a probe: {@code pairs}, a projection of a filter of the candidate pairs
   * (the placeholder of {@link #pairs}), applied to them in the probe's task; null as {@link
   * #of}. */
  public static BatchInput output(Dataset pairs) {
    return plan(new Dataset[] {pairs});
  }

  static BatchInput plan(Dataset[] sides) {
    int n = sides.length;
    Expression[] conditions = new Expression[n];
    Object[] projections = new Object[n];
    Object[] inputs = new Object[n];
    StructType schema = null;
    for (int i = 0; i < n; i++) {
      // (An expression that is not deterministic, or the current time, which optimisation
      // turns into a constant, would hold for one batch only; a subquery or a Python function
      // cannot be evaluated row by row in a task.)
      LogicalPlan analysed = sides[i].queryExecution().analyzed();
      if (!GroupRows.runsAlike(sides[i])
          || analysed.containsPattern(TreePattern$.MODULE$.PYTHON_UDF())) {
        return null;
      }
      LogicalPlan plan = sides[i].queryExecution().optimizedPlan();
      if (!(plan instanceof Project)) {
        return null;
      }
      projections[i] = ((Project) plan).projectList();
      LogicalPlan below = ((Project) plan).child();
      if (below instanceof Filter) {
        conditions[i] = ((Filter) below).condition();
        below = ((Filter) below).child();
      }
      if (!(below instanceof LogicalRDD)) {
        return null;
      }
      inputs[i] = below.output();
      if (schema != null && !schema.equals(below.schema())) {
        return null;
      }
      schema = below.schema();
    }
    return new BatchInput(conditions, projections, inputs, schema, sides[0].schema());
  }

  /** This input reads only the rows of {@code streams} (their indexes): where the batch's
   * partitions are known by stream, the others' are not read ({@link BatchStreams}). */
  public BatchInput reading(int[] streams) {
    this.streams = streams;
    return this;
  }

  /** Rows of this input's layout, none of them: what an outer join's ON condition and the
   * rows its probe decides without a partner are planned over. */
  public Dataset nothing(Dataset batch) {
    SparkSession spark = (SparkSession) batch.sparkSession();
    RDD none = spark.sparkContext().emptyRDD(ClassTag$.MODULE$.apply(InternalRow.class));
    return spark.internalCreateDataFrame(none, layout, false);
  }

  /** Candidate pairs of this input's probe ({@code _sj_l}, {@code _sj_r}), none of them: what
   * its {@link #output} is planned over. */
  public Dataset pairs(Dataset batch) {
    SparkSession spark = (SparkSession) batch.sparkSession();
    RDD none = spark.sparkContext().emptyRDD(ClassTag$.MODULE$.apply(InternalRow.class));
    return spark.internalCreateDataFrame(none, JoinIndex.pairsSchema(layout), false);
  }

  /** The rows this one-sided plan makes of {@code pairs} (a list of rows of {@link #pairs}'s
   * layout that its condition, {@link #test}, kept), as copies. */
  java.util.ArrayList project(java.util.ArrayList pairs) {
    UnsafeProjection make = ((UnsafeProjection[]) made("output", 1)[1])[0];
    java.util.ArrayList out = new java.util.ArrayList();
    for (int i = 0; i < pairs.size(); i++) {
      out.add(make.apply((InternalRow) pairs.get(i)).copy());
    }
    return out;
  }

  /** This one-sided plan's condition, made for the calling thread (null: none, every row
   * holds). */
  BasePredicate test() {
    return ((BasePredicate[]) made("output", 1)[0])[0];
  }

  /** This one-sided plan's condition as a {@link PairTest} of candidate pairs, made for the
   * calling thread (its values are the thread's); null where there is none or PairTest does
   * not take it: then {@link #test} tests each pair. */
  PairTest pairTest() {
    String key = id + "/pairs/" + Thread.currentThread().getId();
    Object made = MADE.get(key);
    if (made == null) {
      PairTest test = PairTest.make(conditions[0], (scala.collection.immutable.Seq) inputs[0]);
      made = test == null ? (Object) Boolean.FALSE : (Object) test;
      if (MADE.size() > 16384) {  // (as in made: start afresh)
        MADE.clear();
      }
      MADE.put(key, made);
    }
    return made instanceof PairTest ? (PairTest) made : null;
  }

  /** The predicates (null: none) and projections of the first {@code sides} sides, made once
   * per thread that runs this input's tasks for {@code use}: a task consumes the rows it
   * makes before it ends (the index copies them), and a thread runs one task at a time. */
  Object[] made(String use, int sides) {
    return made(use, sides, true);
  }

  /** {@link #made}, the predicates left out (null) where not {@code tested}: they are made
   * with other plans' ({@link #tests}). */
  Object[] made(String use, int sides, boolean tested) {
    String key = id + "/" + use + "/" + tested + "/" + Thread.currentThread().getId();
    Object[] made = (Object[]) MADE.get(key);
    if (made != null) {
      return made;
    }
    BasePredicate[] tests = new BasePredicate[sides];
    UnsafeProjection[] makes = new UnsafeProjection[sides];
    for (int i = 0; i < sides; i++) {
      if (tested && conditions[i] != null) {
        tests[i] = Predicate$.MODULE$.create(
            conditions[i], (scala.collection.immutable.Seq) inputs[i]);
        tests[i].initialize(0);
      }
      makes[i] = UnsafeProjection$.MODULE$.create(
          (scala.collection.immutable.Seq) projections[i],
          (scala.collection.immutable.Seq) inputs[i]);
      makes[i].initialize(0);
    }
    // (A shared join's members each have one per thread: room for many.)
    if (MADE.size() > 16384) {  // (inputs planned again, or many threads: start afresh)
      MADE.clear();
    }
    made = new Object[] {tests, makes};
    MADE.put(key, made);
    return made;
  }

  /** The conditions of one-sided plans {@code plans}, all bound to the same rows (planned
   * over one placeholder: {@link #sameRows}), as one projection of a boolean each (null where
   * the condition is unknown), made for the calling thread: one class generated and compiled
   * where a predicate each would be one each (a hundred members' filters took a second). */
  static UnsafeProjection tests(BatchInput[] plans) {
    StringBuilder key = new StringBuilder("tests/");
    for (int i = 0; i < plans.length; i++) {
      key.append(plans[i].id).append(',');
    }
    key.append('/').append(Thread.currentThread().getId());
    UnsafeProjection made = (UnsafeProjection) MADE.get(key.toString());
    if (made != null) {
      return made;
    }
    java.util.ArrayList conditions = new java.util.ArrayList();
    for (int i = 0; i < plans.length; i++) {
      conditions.add(plans[i].conditions[0]);
    }
    made = UnsafeProjection$.MODULE$.create(
        scala.jdk.javaapi.CollectionConverters.asScala(conditions).toList(),
        (scala.collection.immutable.Seq) plans[0].inputs[0]);
    made.initialize(0);
    if (MADE.size() > 16384) {  // (as in made: start afresh)
      MADE.clear();
    }
    MADE.put(key.toString(), made);
    return made;
  }

  /** Whether this one-sided plan's condition reads the same rows as {@code other}'s (the same
   * attributes of one placeholder), so that both can be made together ({@link #tests}). */
  boolean sameRows(BatchInput other) {
    return conditions[0] != null && other.conditions[0] != null
        && inputs[0].equals(other.inputs[0]);
  }

  /** Whether {@code batch} is rows Spark planned (a foreachBatch DataFrame), an RDD. */
  public static boolean planned(Dataset batch) {
    return batch.queryExecution().logical() instanceof LogicalRDD;
  }

  /** Whether {@code batch} is rows Spark planned in the layout the expressions were bound to. */
  public boolean fits(Dataset batch) {
    return planned(batch) && schema.equals(batch.schema());
  }

  /** The probe's input of {@code batch} (see {@link #fits}) in one partition: rows behind
   * {@code lateBefore} (their event time, microseconds) left out. */
  public JavaRDD rows(Dataset batch, long lateBefore) {
    LogicalRDD plan = (LogicalRDD) batch.queryExecution().logical();
    return PlainRdd.mapPartitions(
        BatchStreams.of(plan.rdd(), streams).toJavaRDD().coalesce(1), new Rows(this, lateBefore));
  }

  /** {@link #rows} as rows of this input's layout: a cluster's probe shuffles them to the
   * executors that own the index's partitions ({@link PlacedIndex#probe}), and plans nothing
   * for them but that shuffle. */
  public Dataset delta(Dataset batch, long lateBefore) {
    SparkSession spark = (SparkSession) batch.sparkSession();
    // (Nullable: the layout is one side's plan, whose other side's struct is NULL in the other
    // side's rows, and Spark's generated code trusts a column's nullability.)
    StructType nullable = layout.asNullable();
    return spark.internalCreateDataFrame(rows(batch, lateBefore).rdd(), nullable, false);
  }

  /** The rows of this one-sided input of {@code batch} (see {@link #fits}) in the batch's own
   * partitions, those behind {@code lateBefore} left out, without their event time (the last
   * column, which only that test reads): a GROUP BY buffer's rows of a batch, planned once. */
  public Dataset onTime(Dataset batch, long lateBefore) {
    SparkSession spark = (SparkSession) batch.sparkSession();
    LogicalRDD plan = (LogicalRDD) batch.queryExecution().logical();
    StructField[] fields = new StructField[layout.fields().length - 1];
    System.arraycopy(layout.fields(), 0, fields, 0, fields.length);
    StructType kept = new StructType(fields);
    JavaRDD batchRows = BatchStreams.of(plan.rdd(), streams).toJavaRDD();
    JavaRDD rows = PlainRdd.mapPartitions(batchRows, new Rows(this, lateBefore, kept.length()));
    return spark.internalCreateDataFrame(rows.rdd(), kept.asNullable(), false);
  }

  /** Each side's rows of a partition of the batch, lazily: a row of a self-join's stream is in
   * both. */
  static final class Rows implements FlatMapFunction {
    final BatchInput in;
    final long lateBefore;
    final int kept;  // (the columns each row keeps after the late test; -1: all)

    Rows(BatchInput in, long lateBefore) {
      this(in, lateBefore, -1);
    }

    Rows(BatchInput in, long lateBefore, int kept) {
      this.in = in;
      this.lateBefore = lateBefore;
      this.kept = kept;
    }

    public Iterator call(Object rows) {
      Object[] made = in.made("input", in.conditions.length);
      Sides sides = new Sides(
          (Iterator) rows, (BasePredicate[]) made[0], (UnsafeProjection[]) made[1], lateBefore);
      if (kept >= 0) {
        sides.trim = in.trim(kept);
      }
      return sides;
    }
  }

  /** The projection of a row of this input's layout onto its first {@code n} columns, made
   * once per thread. */
  UnsafeProjection trim(int n) {
    String key = id + "/trim/" + Thread.currentThread().getId();
    UnsafeProjection made = (UnsafeProjection) MADE.get(key);
    if (made == null) {
      DataType[] types = new DataType[n];
      for (int i = 0; i < n; i++) {
        types[i] = layout.fields()[i].dataType();
      }
      made = UnsafeProjection$.MODULE$.create(types);
      MADE.put(key, made);
    }
    return made;
  }

  static final class Sides implements Iterator {
    final Iterator rows;
    final BasePredicate[] tests;
    final UnsafeProjection[] makes;
    final long lateBefore;
    UnsafeProjection trim;  // (null: a row keeps every column)
    InternalRow row;
    int side;
    InternalRow next;

    Sides(Iterator rows, BasePredicate[] tests, UnsafeProjection[] makes, long lateBefore) {
      this.rows = rows;
      this.tests = tests;
      this.makes = makes;
      this.lateBefore = lateBefore;
      this.side = makes.length;  // (the first call takes the first row)
    }

    public boolean hasNext() {
      while (next == null) {
        if (side == makes.length) {
          if (!rows.hasNext()) {
            return false;
          }
          row = (InternalRow) rows.next();
          side = 0;
        }
        int s = side++;
        if (tests[s] != null && !tests[s].eval(row)) {
          continue;
        }
        InternalRow out = makes[s].apply(row);
        // (The event time is the last column: NULL for a stream without one, never late.)
        int t = out.numFields() - 1;
        if (!out.isNullAt(t) && out.getLong(t) < lateBefore) {
          continue;
        }
        next = trim == null ? out : trim.apply(out);
      }
      return true;
    }

    public Object next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      InternalRow out = next;
      next = null;
      return out;
    }
  }
}
