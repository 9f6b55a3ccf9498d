package streamjoin.operator;

import java.util.Iterator;
import org.apache.spark.api.java.function.FlatMapFunction2;
import org.apache.spark.util.CollectionAccumulator;

/**
 * A placed index's probe task: on the executor that owns partition {@code p} of the index, it
 * expires the partition's old rows, then probes and extends it with the batch's rows placed
 * there ({@link IndexProbe}), and sends back what the driver asks of it once they are read.
 * Written for janino: no lambdas, raw collections.
 */
final class PlacedProbe implements FlatMapFunction2 {
  final String name;
  final long leftLeast;
  final long rightLeast;
  final IndexProbe probe;
  final String[] owners;
  CollectionAccumulator counted;  // (null: the probe counts nothing)
  CollectionAccumulator met;  // (an outer join's drain: the rows that met, sent back)

  PlacedProbe(String name, long leftLeast, long rightLeast, IndexProbe probe, String[] owners) {
    this.name = name;
    this.leftLeast = leftLeast;
    this.rightLeast = rightLeast;
    this.probe = probe;
    this.owners = owners;
  }

  public Iterator call(Object placed, Object rows) {
    int p = PlacedIndex.partOf((Iterator) placed);
    IndexPart part = PlacedIndex.owned(name, p, owners);
    synchronized (part) {
      part.expire(leftLeast, rightLeast, null);
    }
    probe.only = p;  // (this task's copy: it decides its own partition's rows, if asked)
    return new Sent(probe.call((Iterator) rows), this, part, p);
  }

  /** What the task sends back once its probe's rows are all read (the probe finds them as
   * they are: {@link ProbePairs}): an outer join's drained rows that met, and the counts. */
  void send(IndexPart part, int p) {
    if (met != null && !probe.met.isEmpty()) {
      long[] sent = new long[3 * probe.met.size()];
      for (int i = 0; i < probe.met.size(); i++) {
        System.arraycopy((long[]) probe.met.get(i), 0, sent, 3 * i, 3);
      }
      met.add(sent);
    }
    if (counted != null) {
      long[] held;
      synchronized (part) {
        held = new long[] {part.size(), part.spilledRows()};
      }
      counted.add(new scala.Tuple3(Integer.valueOf(p), probe.counts, held));
    }
  }

  /** A probe's rows, then, once read to the end, {@link PlacedProbe#send}. */
  static final class Sent implements Iterator {
    final Iterator rows;
    final PlacedProbe probe;
    final IndexPart part;
    final int p;
    boolean sent;

    Sent(Iterator rows, PlacedProbe probe, IndexPart part, int p) {
      this.rows = rows;
      this.probe = probe;
      this.part = part;
      this.p = p;
    }

    public boolean hasNext() {
      if (rows.hasNext()) {
        return true;
      }
      if (!sent) {
        sent = true;
        probe.send(part, p);
      }
      return false;
    }

    public Object next() {
      return rows.next();
    }
  }
}
