package streamjoin.operator;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.MutableProjection;
import org.apache.spark.sql.catalyst.expressions.MutableProjection$;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection$;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.DeclarativeAggregate;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * A GROUP BY buffer's fold of a batch's rows into a row per pane and key (Python's
 * {@code plan/partials.py}), planned once by Spark as an aggregate over a placeholder of the
 * rows and run in the tasks that make the rows, each partition folded by Spark's own aggregate
 * functions (their initial values, updates and results): a batch plans nothing for it. A
 * partition's rows fold apart from another's; a window merges every row of its panes, so two
 * rows of one pane and key are as good as one.
 * Written for janino: no lambdas, raw collections.
 */
public final class PaneFold implements Serializable {
  final Object below;  // (a Seq of the projection under the aggregate, or null: none)
  final Object input;  // (the Seq of the placeholder's attributes)
  final Object child;  // (the Seq of attributes the aggregate reads)
  final Object grouping;  // (the Seq of grouping expressions)
  final DeclarativeAggregate[] functions;
  final int[] from;  // (per output column: its grouping expression, or -1 - its function)
  final StructType schema;

  PaneFold(Object below, Object input, Object child, Object grouping,
      DeclarativeAggregate[] functions, int[] from, StructType schema) {
    this.below = below;
    this.input = input;
    this.child = child;
    this.grouping = grouping;
    this.functions = functions;
    this.from = from;
    this.schema = schema;
  }

  /** An empty relation of {@code rows}'s columns: what the fold is planned over. */
  public static Dataset placeholder(Dataset rows) {
    SparkSession spark = (SparkSession) rows.sparkSession();
    RDD none = spark.sparkContext().emptyRDD(ClassTag$.MODULE$.apply(InternalRow.class));
    return spark.internalCreateDataFrame(none, rows.schema(), false);
  }

  /** The fold {@code planned} (a GROUP BY over a {@link #placeholder}, each item a grouping
   * column or an aggregate of Spark's own, no DISTINCT, no FILTER), or null where its plan is
   * not of that shape. */
  public static PaneFold of(Dataset planned) {
    // (As analysed, not optimised: the optimiser rewrites a sum of small decimals into a
    // sum of their unscaled longs inside another expression, no aggregate of Spark's own.)
    LogicalPlan plan = planned.queryExecution().analyzed();
    if (!(plan instanceof Aggregate)) {
      return null;
    }
    Aggregate a = (Aggregate) plan;
    LogicalPlan c = viewed(a.child());
    Object below = null;
    LogicalPlan scan = c;
    if (c instanceof Project) {
      below = ((Project) c).projectList();
      scan = viewed(((Project) c).child());
    }
    if (!(scan instanceof LogicalRDD)) {
      return null;
    }
    List grouping = CollectionConverters.asJava(a.groupingExpressions());
    List items = CollectionConverters.asJava(a.aggregateExpressions());
    ArrayList functions = new ArrayList();
    int[] from = new int[items.size()];
    for (int i = 0; i < items.size(); i++) {
      NamedExpression item = (NamedExpression) items.get(i);
      Expression e = item instanceof Alias ? ((Alias) item).child() : (Expression) item;
      if (e instanceof AggregateExpression) {
        AggregateExpression agg = (AggregateExpression) e;
        if (agg.isDistinct() || agg.filter().isDefined()
            || !(agg.aggregateFunction() instanceof DeclarativeAggregate)) {
          return null;
        }
        functions.add(agg.aggregateFunction());
        from[i] = -functions.size();
        continue;
      }
      boolean grouped = false;
      for (int g = 0; g < grouping.size() && !grouped; g++) {
        if (((Expression) grouping.get(g)).semanticEquals(e)) {
          from[i] = g;
          grouped = true;
        }
      }
      if (!grouped) {  // (an expression of the grouping columns: not a fold's)
        return null;
      }
    }
    DeclarativeAggregate[] fs =
        (DeclarativeAggregate[]) functions.toArray(new DeclarativeAggregate[0]);
    return new PaneFold(below, scan.output(), c.output(), a.groupingExpressions(), fs, from,
        planned.schema());
  }

  /** {@code plan} under the temp views' names it is read by. */
  static LogicalPlan viewed(LogicalPlan plan) {
    while (plan instanceof SubqueryAlias || plan instanceof View) {
      plan = plan instanceof View ? ((View) plan).child() : ((SubqueryAlias) plan).child();
    }
    return plan;
  }

  /** The columns of the folded rows. */
  public StructType schema() {
    return schema;
  }

  /** {@code rows} (of the placeholder's columns) folded in each of their partitions (lazy:
   * the job that reads them folds them, in the tasks that make the rows). */
  public Dataset apply(Dataset rows) {
    SparkSession spark = (SparkSession) rows.sparkSession();
    LogicalPlan plan = rows.queryExecution().logical();
    // (The rows of an RDD, a probe's or a batch input's, as they are: planning them again
    // would cost a batch as much as the fold saves.)
    JavaRDD in = plan instanceof LogicalRDD
        ? ((LogicalRDD) plan).rdd().toJavaRDD()
        : rows.queryExecution().toRdd().toJavaRDD();
    JavaRDD out = PlainRdd.mapPartitions(in, new Fold(this));
    return spark.internalCreateDataFrame(out.rdd(), schema, false);
  }

  static scala.collection.immutable.Seq seq(List items) {
    return CollectionConverters.asScala(items).toList();
  }

  /** One partition's rows, folded. */
  static final class Fold implements FlatMapFunction {
    final PaneFold fold;

    Fold(PaneFold fold) {
      this.fold = fold;
    }

    public Iterator call(Object given) {
      PaneFold f = fold;
      Iterator rows = (Iterator) given;
      if (!rows.hasNext()) {
        return new ArrayList().iterator();
      }
      scala.collection.immutable.Seq child = (scala.collection.immutable.Seq) f.child;
      UnsafeProjection below = f.below == null ? null : UnsafeProjection$.MODULE$.create(
          (scala.collection.immutable.Seq) f.below, (scala.collection.immutable.Seq) f.input);
      UnsafeProjection keyOf = UnsafeProjection$.MODULE$.create(
          (scala.collection.immutable.Seq) f.grouping, child);
      ArrayList buffer = new ArrayList();
      ArrayList initial = new ArrayList();
      ArrayList updates = new ArrayList();
      ArrayList results = new ArrayList();
      for (int i = 0; i < f.functions.length; i++) {
        buffer.addAll(CollectionConverters.asJava(f.functions[i].aggBufferAttributes()));
        initial.addAll(CollectionConverters.asJava(f.functions[i].initialValues()));
        updates.addAll(CollectionConverters.asJava(f.functions[i].updateExpressions()));
        results.add(f.functions[i].evaluateExpression());
      }
      ArrayList reads = new ArrayList(buffer);
      reads.addAll(CollectionConverters.asJava(child));
      MutableProjection init = MutableProjection$.MODULE$.create(seq(initial));
      MutableProjection update = MutableProjection$.MODULE$.create(seq(updates), seq(reads));
      MutableProjection result = MutableProjection$.MODULE$.create(seq(results), seq(buffer));
      LinkedHashMap groups = new LinkedHashMap();
      JoinedRow joined = new JoinedRow();
      while (rows.hasNext()) {
        InternalRow row = (InternalRow) rows.next();
        // (A copy: a min or max keeps a value of the row, which its iterator reuses.)
        row = (below == null ? row : below.apply(row)).copy();
        UnsafeRow key = keyOf.apply(row);
        InternalRow kept = (InternalRow) groups.get(key);
        if (kept == null) {
          kept = new GenericInternalRow(buffer.size());
          init.target(kept).apply(InternalRow.empty());
          groups.put(key.copy(), kept);
        }
        update.target(kept).apply(joined.apply(kept, row));
      }
      DataType[] types = new DataType[f.from.length];
      for (int c = 0; c < types.length; c++) {
        types[c] = f.schema.fields()[c].dataType();
      }
      ArrayList out = new ArrayList(groups.size());
      Iterator it = groups.entrySet().iterator();
      while (it.hasNext()) {
        Map.Entry e = (Map.Entry) it.next();
        UnsafeRow key = (UnsafeRow) e.getKey();
        InternalRow values = (InternalRow) result.apply((InternalRow) e.getValue());
        Object[] made = new Object[types.length];
        for (int c = 0; c < types.length; c++) {
          int at = f.from[c];
          made[c] = at >= 0 ? key.get(at, types[c]) : values.get(-1 - at, types[c]);
        }
        out.add(new GenericInternalRow(made));
      }
      return out.iterator();
    }
  }
}
