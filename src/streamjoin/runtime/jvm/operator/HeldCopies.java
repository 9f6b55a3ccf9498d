package streamjoin.operator;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.StructType;

/**
 * The tasks' side of {@link GroupRows}: each task's rows copied aside, with their event times
 * (and batches, for units read back), as they pass to the unit's writer, and handed back to the
 * driver, which holds them by pane. Written for janino: no lambdas, raw collections.
 */
final class HeldCopies {
  private HeldCopies() {}

  /**
   * A task's rows passed through to {@code write} ({@link JointWrite#task}'s, or none), each with
   * an event time copied aside (a row without one is in no window: Spark's window() leaves it
   * out); with {@code read} (the rows' columns, else null), units read back whose last column is
   * each row's batch, copied without it. Returns one {@code {rows seen, copies, their times,
   * their batches}}.
   */
  static final class Tee implements FlatMapFunction, Serializable {
    final int time;
    final FlatMapFunction write;
    final StructType read;

    Tee(int time, FlatMapFunction write, StructType read) {
      this.time = time;
      this.write = write;
      this.read = read;
    }

    public Iterator call(Object rows) throws Exception {
      Copies copies = new Copies((Iterator) rows, time, read);
      if (write != null) {
        write.call(copies);
      }
      while (copies.hasNext()) {  // (a write leaves none; the rows of a unit read back)
        copies.next();
      }
      long[] times = new long[copies.times.size()];
      for (int i = 0; i < times.length; i++) {
        times[i] = ((Long) copies.times.get(i)).longValue();
      }
      long[] of = new long[copies.of.size()];
      for (int i = 0; i < of.length; i++) {
        of[i] = ((Long) copies.of.get(i)).longValue();
      }
      Object[] part = new Object[] {Long.valueOf(copies.seen), copies.kept, times, of};
      return Collections.singletonList(part).iterator();
    }
  }

  /** An iterator of rows that keeps a copy of each with an event time (and, with {@code read},
   * the batch of its last column). */
  static final class Copies implements Iterator {
    final Iterator in;
    final int time;
    final StructType read;
    final ArrayList kept = new ArrayList();
    final ArrayList times = new ArrayList();
    final ArrayList of = new ArrayList();
    long seen;

    Copies(Iterator in, int time, StructType read) {
      this.in = in;
      this.time = time;
      this.read = read;
    }

    public boolean hasNext() {
      return in.hasNext();
    }

    public Object next() {
      InternalRow row = (InternalRow) in.next();
      seen++;
      if (row.isNullAt(time)) {
        return row;
      }
      times.add(Long.valueOf(row.getLong(time)));
      if (read == null) {
        kept.add(row.copy());
        of.add(Long.valueOf(-1L));
        return row;
      }
      // (A copy of the whole row first: its values then point into a buffer of its own.)
      InternalRow copy = row.copy();
      int last = read.fields().length - 1;
      Object[] values = new Object[last];
      for (int i = 0; i < last; i++) {
        values[i] = copy.get(i, read.fields()[i].dataType());
      }
      kept.add(new GenericInternalRow(values));
      of.add(Long.valueOf(copy.getLong(last)));
      return row;
    }
  }

  /** A {@link Tee}'s part of a task, with the index of the buffer whose rows it read. */
  static final class Tagged implements FlatMapFunction, Serializable {
    final int index;
    final Tee tee;

    Tagged(int index, Tee tee) {
      this.index = index;
      this.tee = tee;
    }

    public Iterator call(Object rows) throws Exception {
      Object part = ((Iterator) tee.call(rows)).next();
      Object[] tagged = new Object[] {Integer.valueOf(index), part};
      return Collections.singletonList(tagged).iterator();
    }
  }
}
