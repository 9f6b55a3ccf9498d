package streamjoin.operator;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;

/**
 * The rows one task's {@link IndexProbe} makes, found as they are read: the batch's rows are
 * stored in their partitions first, then each partition's probing rows find their pairs a
 * chunk at a time, then an outer join's rows without a partner follow. So a batch's pairs
 * stream out of the task to its writer and never wait in memory together (a batch of millions
 * of pairs would not fit; one probing row's pairs are found together). Every reader reads to
 * the end: a partition's matches are marked, and its rows spilled, only once its probes are
 * done. A task run again takes the batch's rows back and stores them again ({@link
 * IndexProbe#store}); an attempt killed meanwhile stops at its next chunk, so that it never
 * probes a partition its rerun is changing.
 * Written for janino: no lambdas, raw collections.
 */
final class ProbePairs implements Iterator {
  static final int CHUNK = 4096;  // (candidate pairs found per step, before the query's output)

  final IndexProbe probe;
  final ArrayList stored = new ArrayList();  // ({partition, its rows per side, older} each)
  int taken;  // (the partitions probed or being probed)
  IndexPart part;  // (the partition being probed; null: the next)
  ArrayList[] delta;
  int[][] older;  // (IndexProbe#store's: per table and side, the slot of its first new row)
  int side;  // (the side whose rows probe: 0, left rows probe the right side; then 1)
  int at;  // (the next of those rows)
  boolean probed;  // (every partition probed)
  boolean ended;  // (and an outer join's rows without a partner made)
  ArrayList chunk = new ArrayList();
  int next;
  ParallelPairs owner;  // (a worker's: its task's rows; they stop once the task has ended)

  /** Finds the pairs of the partitions {@code stored} ({@link #store}'s) as they are read. */
  ProbePairs(IndexProbe probe, ArrayList stored) {
    this.probe = probe;
    this.stored.addAll(stored);
  }

  /** Stores the batch's rows {@code parts} in their partitions, before any probe: {partition,
   * its rows per side, older} each. */
  static ArrayList store(IndexProbe probe, Iterator parts) {
    ArrayList stored = new ArrayList();
    while (parts.hasNext()) {
      java.util.Map.Entry e = (java.util.Map.Entry) parts.next();
      IndexPart p = JoinIndex.part(probe.name, ((Integer) e.getKey()).intValue());
      ArrayList[] rows = (ArrayList[]) e.getValue();
      synchronized (p) {
        stored.add(new Object[] {p, rows, probe.store(p, rows)});
      }
    }
    return stored;
  }

  /** The next chunk of rows, taken whole (null: none is left): a reader on another thread's
   * ({@link ParallelPairs}). */
  ArrayList take() {
    while (next >= chunk.size()) {
      if (ended) {
        return null;
      }
      fill();
    }
    ArrayList taken = chunk;
    chunk = new ArrayList();
    next = 0;
    return taken;
  }

  public boolean hasNext() {
    while (next >= chunk.size()) {
      if (ended) {
        return false;
      }
      fill();
    }
    return true;
  }

  public Object next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    Object row = chunk.get(next);
    chunk.set(next++, null);  // (a row read is the reader's: the chunk does not keep it)
    return row;
  }

  /** The next chunk ({@link #fillChunk}), its pairs tested and its CPU time added to {@link
   * ProbeWork}'s. */
  void fill() {
    long since = ProbeWork.cpu();
    try {
      fillChunk();
    } finally {
      ProbeWork.add(probe.tested, since);
      probe.tested = 0;
    }
  }

  /** The next chunk: pairs until a chunk's worth or the last partition, as the query's rows;
   * after the last, an outer join's rows without a partner (every pair has marked its rows). */
  void fillChunk() {
    org.apache.spark.TaskContext task = org.apache.spark.TaskContext.get();
    if (task != null && task.isInterrupted()) {
      throw new org.apache.spark.TaskKilledException("streamjoin: the probe's task was killed");
    }
    next = 0;
    if (probed) {
      ended = true;
      chunk = probe.alone == null ? new ArrayList() : probe.alone.project(OuterMarks.unmatched(probe));
      return;
    }
    ArrayList found = new ArrayList();
    while (found.size() < CHUNK) {
      if (part == null && !nextPart()) {
        probed = true;
        break;
      }
      synchronized (part) {
        ArrayList rows = delta[side];
        while (at < rows.size() && found.size() < CHUNK) {
          if (owner != null && owner.stopped) {
            throw new org.apache.spark.TaskKilledException("streamjoin: the probe's task ended");
          }
          probe.find((IndexRows.Entry) rows.get(at++), part, 1 - side, older, found);
        }
        if (at < rows.size()) {
          continue;
        }
        if (side == 0) {
          side = 1;
          at = 0;
          continue;
        }
        probe.settle(part, delta);
      }
      part = null;
    }
    chunk = probe.output == null ? found : probe.output.project(found);
  }

  /** Takes the next partition; false: none is left. */
  boolean nextPart() {
    if (taken == stored.size()) {
      return false;
    }
    Object[] p = (Object[]) stored.get(taken);
    stored.set(taken++, null);
    part = (IndexPart) p[0];
    delta = (ArrayList[]) p[1];
    older = (int[][]) p[2];
    side = 0;
    at = 0;
    return true;
  }

  /** The pair of {@code d} with stored row {@code o} (and the table it was found in). */
  static InternalRow pair(IndexRows.Entry d, InternalRow o, boolean left, boolean tabbed) {
    InternalRow l = left ? d.row : o;
    InternalRow r = left ? o : d.row;
    Object[] values =
        tabbed ? new Object[] {l, r, Integer.valueOf(d.tab)} : new Object[] {l, r};
    return new GenericInternalRow(values);
  }
}
