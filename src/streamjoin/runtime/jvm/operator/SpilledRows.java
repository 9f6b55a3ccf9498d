package streamjoin.operator;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

/**
 * The rows of an {@link IndexSide} whose bytes went to files ({@link SpillFile}) when its
 * partition held more than its memory budget ({@link IndexPart#fit}): the oldest rows in memory
 * go first, so the spilled slots are a prefix of the side's. Their slots stay in the side, with
 * {@code rows[i]} null, and {@link #read} reads a row back. Written for janino: no lambdas, no
 * generics.
 */
final class SpilledRows {
  java.util.ArrayList files = new java.util.ArrayList();  // (in slot order)
  long[] at;  // (where each spilled slot's row lies in its file; made at the first spill)
  int below;  // (the slot below which rows were spilled or left in memory)
  int live;  // (live rows spilled)

  /** Spills the side's oldest rows still in memory until those left hold at most {@code keep}
   * bytes (or none is left to spill), in new files of at most {@link SpillFile#MOST_BYTES}. */
  void spill(IndexSide s, long keep) {
    while (s.held > keep) {
      int from = Math.max(below, s.start);
      int to = from;
      long left = s.held;
      long bytes = 0;
      while (to < s.end && left > keep && bytes < SpillFile.MOST_BYTES) {
        if (s.rows[to] instanceof UnsafeRow) {
          left -= IndexSide.bytesOf(s.rows[to]);
          bytes += IndexSide.bytesOf(s.rows[to]);
        }
        to++;
      }
      if (to == from) {
        return;
      }
      if (at == null) {
        at = new long[s.keys.length];
      }
      SpillFile file = SpillFile.write(s.rows, from, to, at);
      for (int i = from; i < to; i++) {
        if (s.rows[i] instanceof UnsafeRow) {
          s.held -= IndexSide.bytesOf(s.rows[i]);
          s.rows[i] = null;
          live++;
        }
      }
      files.add(file);
      below = to;
    }
  }

  /** Spilled row {@code i}, read back from its file. */
  InternalRow read(int i) {
    int lo = 0;
    int hi = files.size() - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) >>> 1;
      if (((SpillFile) files.get(mid)).first <= i) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return ((SpillFile) files.get(lo)).read(at[i]);
  }

  /** Row {@code i}, not in memory, leaves the side: it was spilled where below {@link #below}. */
  void forget(int i) {
    if (i < below) {
      live--;
    }
  }

  /** The side's rows below slot {@code start} expired: the files wholly below it go. */
  void expired(int start) {
    while (!files.isEmpty() && ((SpillFile) files.get(0)).end <= start) {
      ((SpillFile) files.remove(0)).close();
    }
    below = Math.max(below, start);
  }

  /** The side's rows from slot {@code end} on were taken back: those slots are free again. */
  void undone(int end) {
    if (below <= end) {
      return;
    }
    below = end;
    while (!files.isEmpty() && ((SpillFile) files.get(files.size() - 1)).first >= end) {
      ((SpillFile) files.remove(files.size() - 1)).close();
    }
    if (!files.isEmpty()) {
      SpillFile last = (SpillFile) files.get(files.size() - 1);
      last.end = Math.min(last.end, end);
    }
  }

  /** The side's slots were moved: the {@code live} rows from slot {@code from} now start at
   * 0, in arrays of {@code capacity} (its reclaim). */
  void resize(int capacity, int from, int liveSlots) {
    if (at != null) {
      long[] moved = new long[capacity];
      System.arraycopy(at, from, moved, 0, liveSlots);
      at = moved;
    }
    for (int f = 0; f < files.size(); f++) {  // (expiry dropped those wholly below from)
      SpillFile file = (SpillFile) files.get(f);
      file.first = Math.max(file.first - from, 0);
      file.end -= from;
    }
    below = Math.max(below - from, 0);
  }

  /** Deletes the files: the side is dropped. */
  void close() {
    java.util.ArrayList gone = files;
    files = new java.util.ArrayList();  // (a read after this fails; it never reads a file gone)
    for (int f = 0; f < gone.size(); f++) {
      ((SpillFile) gone.get(f)).close();
    }
  }

  /** The heap its slot array takes. */
  long bytes() {
    return at == null ? 0L : 8L * at.length;
  }
}
