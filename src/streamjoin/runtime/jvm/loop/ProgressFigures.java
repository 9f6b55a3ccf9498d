package streamjoin.loop;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.util.AccumulatorContext;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A micro-batch's figures set as the value of its plan's observation, in one call from Python
 * (the same steps from Python are some fifteen calls into the JVM a batch). Spark's streaming
 * classes are internal and move between versions, so they are reached by name, as the Python
 * steps reach them; anything not as expected is an exception, which the caller reports once.
 * Written for janino: no lambdas, no generics.
 */
public final class ProgressFigures {
  private ProgressFigures() {}

  static boolean metricsFailed;

  /**
   * Sets observation {@code name} of the micro-batch that the calling thread runs (Spark's
   * local property names its query) to {@code row}, an {@code UnsafeRow} of {@code fields}
   * fields; false where there is no such batch, plan or observation. In either loop, the row's
   * numbers, named and typed by {@code kinds}, go to Spark's metrics system ({@link
   * FiguresSource}).
   */
  public static boolean publish(
      SparkSession spark, String name, byte[] row, int fields, String kinds) throws Exception {
    try {
      FiguresSource.set(row, fields, kinds);
    } catch (RuntimeException e) {  // (said once; Spark's progress still gets them)
      if (!metricsFailed) {
        metricsFailed = true;
        System.err.println("streamjoin: the figures are not in Spark's metrics system (" + e + ")");
      }
    }
    String id = spark.sparkContext().getLocalProperty("sql.streaming.queryId");
    if (id == null || id.isEmpty()) {
      return false;
    }
    Object query = spark.streams().get(id);
    if (query == null) {
      return false;
    }
    Object execution = call(call(query, "streamingQuery"), "lastExecution");
    if (execution == null) {
      return false;
    }
    SparkPlan node = find((SparkPlan) call(execution, "executedPlan"), name);
    if (node == null) {
      return false;
    }
    long accumulatorId = ((Number) call(node, "accumulatorId")).longValue();
    scala.Option found = AccumulatorContext.get(accumulatorId);
    if (found.isEmpty()) {
      return false;
    }
    Object accumulator = found.get();
    UnsafeRow value = new UnsafeRow(fields);
    value.pointTo(row, row.length);
    if ("LastAttemptAggregatingAccumulator".equals(accumulator.getClass().getSimpleName())) {
      // (Spark 4.1 on: the value of the batch's last read of its plan wins over a value set
      // on the driver, unless the reads' values are dropped first.)
      call(accumulator, "resetLastAttemptAccumulator");
      call(accumulator, "setValueIfOnDriverSide", value);
    } else {
      call(accumulator, "reset");
      call(accumulator, "mergeBuffer", value);  // (`max`'s buffer is its value)
    }
    return true;
  }

  /**
   * A stream of no rows in {@code like}'s columns (new attributes of the same names and types),
   * which no source feeds: the branch of a stream's union that carries its observation.
   */
  public static Dataset emptyStream(Dataset like) throws Exception {
    scala.collection.Iterator it = like.logicalPlan().output().iterator();
    java.util.ArrayList fresh = new java.util.ArrayList();
    while (it.hasNext()) {
      fresh.add(((Attribute) it.next()).newInstance());
    }
    Object output = CollectionConverters.asScala(fresh).toList();
    // (LocalRelation's parameters after (output, data, isStreaming) vary between versions:
    // each takes its default.)
    Constructor[] made = LocalRelation.class.getConstructors();
    Constructor widest = made[0];
    for (int i = 1; i < made.length; i++) {
      if (made[i].getParameterCount() > widest.getParameterCount()) {
        widest = made[i];
      }
    }
    Object[] args = new Object[widest.getParameterCount()];
    args[0] = output;
    args[1] = scala.collection.immutable.Nil$.MODULE$;
    args[2] = Boolean.TRUE;
    for (int i = 3; i < args.length; i++) {
      args[i] = LocalRelation.class.getMethod("apply$default$" + (i + 1)).invoke(null);
    }
    LogicalPlan plan = (LogicalPlan) widest.newInstance(args);
    return Dataset.ofRows(like.sparkSession(), plan);
  }

  /** The {@code CollectMetrics} node named {@code name} in {@code plan}, or null. */
  static SparkPlan find(SparkPlan plan, String name) throws Exception {
    java.util.ArrayDeque nodes = new java.util.ArrayDeque();
    nodes.push(plan);
    while (!nodes.isEmpty()) {
      SparkPlan node = (SparkPlan) nodes.pop();
      if ("CollectMetrics".equals(node.nodeName()) && name.equals(call(node, "name"))) {
        return node;
      }
      scala.collection.Iterator children = node.children().iterator();
      while (children.hasNext()) {
        nodes.push(children.next());
      }
    }
    return null;
  }

  static Object call(Object target, String method) throws Exception {
    return call(target, method, new Object[0]);
  }

  static Object call(Object target, String method, Object arg) throws Exception {
    return call(target, method, new Object[] {arg});
  }

  /** {@code target}'s public method {@code method} called with {@code args} (by name and
   * number of arguments). */
  static Object call(Object target, String method, Object[] args) throws Exception {
    String key = target.getClass().getName() + "." + method + "/" + args.length;
    Method found = (Method) METHODS.get(key);
    if (found == null) {
      Method[] methods = target.getClass().getMethods();
      for (int i = 0; i < methods.length && found == null; i++) {
        Method m = methods[i];
        if (m.getName().equals(method) && m.getParameterCount() == args.length) {
          found = m;
        }
      }
      if (found == null) {
        throw new NoSuchMethodException(key);
      }
      METHODS.put(key, found);
    }
    return found.invoke(target, args);
  }

  /** The methods {@link #call} found, by class, name and number of arguments. */
  static final ConcurrentHashMap METHODS = new ConcurrentHashMap();
}
