package streamjoin.operator;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An RDD's partitions mapped by a Java function, and a job that collects an RDD, without the
 * wrappers of Spark's Java API. Each of those wrappers is a Scala lambda, and Spark checks every
 * lambda it is handed for return statements by reading and parsing the whole class file that
 * declares it (JavaRDDLike, RDD, SparkContext, among Spark's largest), on the driver's thread,
 * every batch (docs/dev-log.md). The functions here are plain Java objects, which the check
 * passes over. Written for janino: no lambdas, raw collections.
 */
public final class PlainRdd {
  private PlainRdd() {}

  static final ClassTag ANY = ClassTag$.MODULE$.AnyRef();

  /** {@code rdd}'s partitions mapped by {@code f}, as {@code JavaRDD.mapPartitions}. */
  public static JavaRDD mapPartitions(JavaRDD rdd, FlatMapFunction f) {
    return rdd.rdd().mapPartitionsInternal(new Mapped(f), false, ANY).toJavaRDD();
  }

  /** Every row of {@code rdd}, partition by partition, as {@code JavaRDD.collect}: one job. */
  public static List collect(JavaRDD rdd) {
    RDD r = rdd.rdd();
    Object[] parts = (Object[]) r.context().runJob(r, new Collected(), ANY);
    List all = new ArrayList();
    for (int i = 0; i < parts.length; i++) {
      all.addAll(Arrays.asList((Object[]) parts[i]));
    }
    return all;
  }

  /** A partition's iterator through {@code f}. */
  static final class Mapped extends AbstractFunction1 implements Serializable {
    final FlatMapFunction f;

    Mapped(FlatMapFunction f) {
      this.f = f;
    }

    public Object apply(Object rows) {
      Iterator in = CollectionConverters.asJava((scala.collection.Iterator) rows);
      Iterator out;
      try {
        out = f.call(in);
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {  // (a checked one, as a write's IOException: Scala's declare none)
        throw new RuntimeException(e);
      }
      return CollectionConverters.asScala(out);
    }
  }

  /** A partition's rows as an array. */
  static final class Collected extends AbstractFunction2 implements Serializable {
    public Object apply(Object context, Object rows) {
      scala.collection.Iterator it = (scala.collection.Iterator) rows;
      ArrayList all = new ArrayList();
      while (it.hasNext()) {
        all.add(it.next());
      }
      return all.toArray();
    }
  }
}
