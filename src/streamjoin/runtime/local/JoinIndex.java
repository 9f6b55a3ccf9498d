package streamjoin;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.ForeachPartitionFunction;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The live state of two-way equi joins as hash indexes in the executor's memory, kept across
 * micro-batches: one per query and shuffle partition, each side's rows by the hash of their
 * key, and in arrival order for expiry. A batch's delta is shuffled by the same hash; each task
 * probes and extends its partition's index (the delta rule: new left rows meet old and new
 * right rows, new right rows meet old left rows) and returns the candidate pairs, which the
 * query's whole predicate then filters in Spark SQL.
 *
 * <p>Input rows: {@code _sj_side} (0 left, 1 right), {@code _sj_key} (a 64-bit hash of the key
 * values; NULL: a NULL key, which meets nothing), {@code _sj_ts} (event time in microseconds, or
 * NULL), {@code _sj_l} and {@code _sj_r} (the row, as a struct on its side's column). Each
 * partition records the last batch applied: a batch run again (a retried task, a batch rerun
 * after a failure) first takes back the rows it added. Written for Spark's own Java compiler
 * (janino): no lambdas, raw collections.
 */
public final class JoinIndex {
  private JoinIndex() {}

  /** One stored row. */
  static final class Entry {
    final long key;
    final long ts;
    final long batch;
    final Row row;

    Entry(long key, long ts, long batch, Row row) {
      this.key = key;
      this.ts = ts;
      this.batch = batch;
      this.row = row;
    }
  }

  /** One side's rows of one partition. */
  static final class Side {
    final HashMap byKey = new HashMap();
    final ArrayDeque byTime = new ArrayDeque();
    long rows;

    void add(Entry e) {
      Long k = Long.valueOf(e.key);
      ArrayList list = (ArrayList) byKey.get(k);
      if (list == null) {
        list = new ArrayList();
        byKey.put(k, list);
      }
      list.add(e);
      byTime.addLast(e);
      rows++;
    }

    void forget(Entry e) {
      Long k = Long.valueOf(e.key);
      ArrayList list = (ArrayList) byKey.get(k);
      for (int i = list.size() - 1; i >= 0; i--) {
        if (list.get(i) == e) {
          list.remove(i);
          break;
        }
      }
      if (list.isEmpty()) {
        byKey.remove(k);
      }
      rows--;
    }

    /** Drops the rows older than {@code least} from the oldest arrived on (a row that arrived
     * after a younger one waits for it: it can meet no new row, and the predicate drops it). */
    void expire(long least) {
      while (!byTime.isEmpty() && ((Entry) byTime.peekFirst()).ts < least) {
        forget((Entry) byTime.pollFirst());
      }
    }

    /** Takes back the rows batch {@code batch} added, the newest. */
    void undo(long batch) {
      while (!byTime.isEmpty() && ((Entry) byTime.peekLast()).batch == batch) {
        forget((Entry) byTime.pollLast());
      }
    }
  }

  /** Both sides of one partition, at the version of the last batch applied. */
  static final class Part {
    final Side[] sides = new Side[] {new Side(), new Side()};
    long version;

    Part(long version) {
      this.version = version;
    }
  }

  static final ConcurrentHashMap PARTS = new ConcurrentHashMap();

  static Part part(String name, int p) {
    Part part = (Part) PARTS.get(name + "/" + p);
    if (part == null) {
      throw new IllegalStateException("streamjoin: no index for " + name + " partition " + p);
    }
    return part;
  }

  /** Empty indexes for {@code name} in {@code parts} partitions, at batch {@code version}. */
  public static void reset(String name, int parts, long version) {
    drop(name);
    for (int p = 0; p < parts; p++) {
      PARTS.put(name + "/" + p, new Part(version));
    }
  }

  /** Forgets every partition of {@code name}. */
  public static void drop(String name) {
    Iterator it = PARTS.keySet().iterator();
    while (it.hasNext()) {
      String key = (String) it.next();
      if (key.startsWith(name + "/")) {
        it.remove();
      }
    }
  }

  /** Rows held by the partitions of {@code name}, both sides. */
  public static long rows(String name) {
    long n = 0;
    Iterator it = PARTS.entrySet().iterator();
    while (it.hasNext()) {
      java.util.Map.Entry e = (java.util.Map.Entry) it.next();
      if (((String) e.getKey()).startsWith(name + "/")) {
        Part part = (Part) e.getValue();
        n += part.sides[0].rows + part.sides[1].rows;
      }
    }
    return n;
  }

  static Entry entry(Row r, long batch) {
    if (r.isNullAt(1)) {
      return null;
    }
    long ts = r.isNullAt(2) ? Long.MAX_VALUE : r.getLong(2);
    return new Entry(r.getLong(1), ts, batch, r.getStruct(3 + r.getInt(0)));
  }

  static Dataset shuffled(Dataset in, int parts) {
    return in.repartition(parts, new Column[] {in.col("_sj_key")});
  }

  /** Loads committed rows into the (reset) indexes of {@code name}: one Spark job. */
  public static void load(Dataset in, String name, int parts) {
    shuffled(in, parts).foreachPartition(new Load(name));
  }

  /** The candidate pairs of batch {@code batch}'s delta {@code in} (lazy: the job that reads
   * them applies the batch); rows with event times below {@code leftLeast} (left) and
   * {@code rightLeast} (right) are dropped first. */
  public static Dataset probe(
      Dataset in, String name, int parts, long batch, long leftLeast, long rightLeast) {
    StructType s = in.schema();
    StructType out = new StructType(new StructField[] {s.apply("_sj_l"), s.apply("_sj_r")});
    Probe f = new Probe(name, batch, leftLeast, rightLeast);
    return shuffled(in, parts).mapPartitions(f, Encoders.row(out));
  }

  static final class Load implements ForeachPartitionFunction {
    final String name;

    Load(String name) {
      this.name = name;
    }

    public void call(Iterator rows) {
      Part part = part(name, TaskContext.getPartitionId());
      synchronized (part) {
        while (rows.hasNext()) {
          Row r = (Row) rows.next();
          Entry e = entry(r, Long.MIN_VALUE);
          if (e != null) {
            part.sides[r.getInt(0)].add(e);
          }
        }
      }
    }
  }

  static final class Probe implements MapPartitionsFunction {
    final String name;
    final long batch;
    final long leftLeast;
    final long rightLeast;

    Probe(String name, long batch, long leftLeast, long rightLeast) {
      this.name = name;
      this.batch = batch;
      this.leftLeast = leftLeast;
      this.rightLeast = rightLeast;
    }

    public Iterator call(Iterator rows) {
      ArrayList[] delta = new ArrayList[] {new ArrayList(), new ArrayList()};
      while (rows.hasNext()) {
        Row r = (Row) rows.next();
        Entry e = entry(r, batch);
        if (e != null) {
          delta[r.getInt(0)].add(e);
        }
      }
      Part part = part(name, TaskContext.getPartitionId());
      ArrayList out = new ArrayList();
      synchronized (part) {
        if (part.version == batch) {
          part.sides[0].undo(batch);
          part.sides[1].undo(batch);
        } else if (part.version != batch - 1) {
          throw new IllegalStateException(
              "streamjoin: index " + name + " is at batch " + part.version + ", not " + (batch - 1));
        }
        part.sides[0].expire(leftLeast);
        part.sides[1].expire(rightLeast);
        for (int i = 0; i < delta[1].size(); i++) {
          part.sides[1].add((Entry) delta[1].get(i));
        }
        find(delta[0], part.sides[1], true, out);
        find(delta[1], part.sides[0], false, out);
        for (int i = 0; i < delta[0].size(); i++) {
          part.sides[0].add((Entry) delta[0].get(i));
        }
        part.version = batch;
      }
      return out.iterator();
    }

    static void find(ArrayList delta, Side other, boolean left, ArrayList out) {
      for (int i = 0; i < delta.size(); i++) {
        Entry d = (Entry) delta.get(i);
        ArrayList found = (ArrayList) other.byKey.get(Long.valueOf(d.key));
        if (found == null) {
          continue;
        }
        for (int j = 0; j < found.size(); j++) {
          Entry o = (Entry) found.get(j);
          out.add(left ? RowFactory.create(new Object[] {d.row, o.row}) : RowFactory.create(new Object[] {o.row, d.row}));
        }
      }
    }
  }
}
