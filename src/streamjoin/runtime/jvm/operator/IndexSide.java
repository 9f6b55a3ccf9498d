package streamjoin.operator;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

/**
 * One side's rows of one {@link JoinIndex} partition. The rows are kept in arrival order in
 * parallel arrays, the live ones from {@code start} to {@code end}. Each key's rows are chained
 * newest first through {@code older}, and an open-addressing table finds a key's newest row. A
 * full history holds hundreds of thousands of rows a side. As a graph of objects (a boxed key,
 * a map node, a list and an entry per row), every young collection traced and copied them. In
 * arrays, a row is five array slots and its own copy.
 *
 * <p>Rows leave from the oldest ({@link #expire}) or the newest ({@link #undo}) end only, so a
 * chain's dead rows are always its tail: a walk stops at the first row below {@code start}.
 * Dead slots are reclaimed when the arrays are full, by moving the live rows down and building
 * the table again.
 *
 * <p>Over its partition's memory budget ({@link IndexPart#fit}), the oldest rows' bytes spill
 * to files ({@link #spillTo}, {@link SpillFile}): their slots stay, {@code rows[i]} is null,
 * and {@link #row} reads them back. Written for janino: no lambdas, no generics.
 */
public final class IndexSide {
  static final int FREE = Integer.MIN_VALUE;  // (a table slot no key has taken)
  static final long NOT_DECIDED = Long.MIN_VALUE;
  static final long DECIDED_BEFORE = Long.MIN_VALUE + 1;  // (by a batch before a rebuild)
  static final long COPY = Long.MIN_VALUE + 2;  // (a row's copy that another copy decides)

  long[] keys = new long[16];
  long[] times = new long[16];
  long[] batches = new long[16];
  long[] buckets = new long[16];  // (a band row's own bucket, for a probe of a wide range)
  // An outer join's preserved rows: whether a partner matched, and the batch that decided
  // one without (NOT_DECIDED: none yet; a rerun of that batch decides it again).
  boolean[] matched = new boolean[16];
  long[] decided = new long[16];
  long[] ids = new long[16];  // (a row with several copies: its identity in the shared marks)
  InternalRow[] rows = new InternalRow[16];
  int[] older = new int[16];  // (the same key's next older row; -1: none)
  // (The first slot of the run of consecutive slots of row i's key that ends at i: a band's
  // time bucket arrives in runs, so a probe takes a run of its rows without walking them.)
  int[] runs = new int[16];
  SideColumns columns;  // (the columns a probe's PairTest reads; null: none asked)
  int start;
  int end;
  // Spill: bytes of the rows held in memory (as `bytesOf` counts them); the files of the
  // rows spilled, in slot order (SpillFile); where each spilled row lies in its file; the slot
  // below which rows were spilled or left in memory; the live rows spilled.
  long held;
  java.util.ArrayList spills = new java.util.ArrayList();
  long[] spillAt = new long[16];
  int spilled;
  int spilledLive;

  long[] slotKeys = new long[32];
  int[] heads = free(32);  // (each slot's newest row; -1: the key has no live row)
  int used;  // (slots taken, keys with no live row included)

  static int[] free(int n) {
    int[] a = new int[n];
    java.util.Arrays.fill(a, FREE);
    return a;
  }

  public IndexSide() {}

  /** Live rows. */
  public int size() {
    return end - start;
  }

  /** Keys in the table, some perhaps with no live row: a bound for a band's probe. */
  int keyCount() {
    return used;
  }

  void add(IndexRows.Entry e) {
    e.at = add(e.key, e.bucket, e.ts, e.batch, e.row);
    matched[e.at] = e.matched;
    ids[e.at] = e.id;
    if (e.copy) {
      decided[e.at] = COPY;
    }
  }

  /** Adds a row of key {@code key}, event time {@code ts} (the expiry's), from batch
   * {@code batch}, as the newest. */
  public int add(long key, long ts, long batch, InternalRow row) {
    return add(key, 0L, ts, batch, row);
  }

  /** {@link #add} of a band's row of bucket {@code bucket}; returns its index. */
  public int add(long key, long bucket, long ts, long batch, InternalRow row) {
    if (end == keys.length) {
      reclaim();
    }
    int i = end++;
    keys[i] = key;
    buckets[i] = bucket;
    times[i] = ts;
    batches[i] = batch;
    rows[i] = row;
    if (columns != null) {
      columns.set(i, row);
    }
    held += bytesOf(row);
    matched[i] = false;
    decided[i] = NOT_DECIDED;
    link(i);
    return i;
  }

  /** Chains row {@code i} as its key's newest. */
  void link(int i) {
    if (2 * (used + 1) > heads.length) {
      rehash();
    }
    int s = slot(keys[i]);
    if (heads[s] == FREE) {
      slotKeys[s] = keys[i];
      used++;
      older[i] = -1;
    } else {
      older[i] = heads[s] >= start ? heads[s] : -1;
    }
    runs[i] = older[i] >= 0 && older[i] == i - 1 ? runs[i - 1] : i;
    heads[s] = i;
  }

  /** Drops the rows older than {@code least} from the oldest arrived on (a row that arrived
   * after a younger one waits for it: it can meet no new row, and the predicate drops it);
   * a deciding copy's mark leaves the index's shared {@code marks} (if any) with it. */
  public void expire(long least, java.util.Set marks) {
    while (start < end && times[start] < least) {
      if (marks != null && decided[start] != COPY) {
        marks.remove(Long.valueOf(ids[start]));
      }
      forget(start);
      rows[start++] = null;
    }
    while (!spills.isEmpty() && ((SpillFile) spills.get(0)).end <= start) {
      ((SpillFile) spills.remove(0)).close();
    }
    spilled = Math.max(spilled, start);
  }

  /** Row {@code i}'s bytes leave the count, in memory or spilled. */
  void forget(int i) {
    if (rows[i] != null) {
      held -= bytesOf(rows[i]);
    } else if (i < spilled) {
      spilledLive--;
    }
  }

  /** The heap a row held in memory takes, about: its bytes and its objects. */
  static long bytesOf(InternalRow row) {
    return row instanceof UnsafeRow ? ((UnsafeRow) row).getSizeInBytes() + 48L : 256L;
  }

  /** Live rows spilled to files. */
  public int spilledRows() {
    return spilledLive;
  }

  /** Spills the oldest rows still in memory, until those left hold at most {@code keep} bytes
   * (or none is left to spill), in new files of at most {@link SpillFile#MOST_BYTES} each. */
  public void spillTo(long keep) {
    while (held > keep) {
      int from = Math.max(spilled, start);
      int to = from;
      long left = held;
      long bytes = 0;
      while (to < end && left > keep && bytes < SpillFile.MOST_BYTES) {
        if (rows[to] instanceof UnsafeRow) {
          left -= bytesOf(rows[to]);
          bytes += bytesOf(rows[to]);
        }
        to++;
      }
      if (to == from) {
        return;
      }
      SpillFile file = SpillFile.write(rows, from, to, spillAt);
      for (int i = from; i < to; i++) {
        if (rows[i] instanceof UnsafeRow) {
          held -= bytesOf(rows[i]);
          rows[i] = null;
          spilledLive++;
        }
      }
      spills.add(file);
      spilled = to;
    }
  }

  /** Deletes the spill files: the side is dropped. */
  public void close() {
    java.util.ArrayList files = spills;
    spills = new java.util.ArrayList();  // (a read after this fails; it never reads a file gone)
    for (int s = 0; s < files.size(); s++) {
      ((SpillFile) files.get(s)).close();
    }
  }

  /** Takes back the rows batch {@code batch} added, the newest. */
  public void undo(long batch) {
    while (end > start && batches[end - 1] == batch) {
      int i = --end;
      int s = slot(keys[i]);
      heads[s] = older[i] >= start ? older[i] : -1;  // (row i was its key's newest)
      forget(i);
      rows[i] = null;
    }
    if (spilled > end) {  // (its files' slots from end on are free again)
      spilled = end;
      while (!spills.isEmpty() && ((SpillFile) spills.get(spills.size() - 1)).first >= end) {
        ((SpillFile) spills.remove(spills.size() - 1)).close();
      }
      if (!spills.isEmpty()) {
        SpillFile last = (SpillFile) spills.get(spills.size() - 1);
        last.end = Math.min(last.end, end);
      }
    }
  }

  /** Row {@code i} (a live one's index, from {@link #first} or {@link #next}). */
  public InternalRow row(int i) {
    InternalRow r = rows[i];
    return r != null ? r : spilledRow(i);
  }

  /** Spilled row {@code i}, read back from its file (the files are in slot order). */
  InternalRow spilledRow(int i) {
    int lo = 0;
    int hi = spills.size() - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) >>> 1;
      if (((SpillFile) spills.get(mid)).first <= i) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return ((SpillFile) spills.get(lo)).read(spillAt[i]);
  }

  /** The newest live row of {@code key}; -1: none. */
  public int first(long key) {
    int s = slot(key);
    int h = heads[s];
    return h >= start ? h : -1;  // (FREE and -1 are below any start)
  }

  /** The oldest live row of the run of consecutive slots of row {@code i}'s key that ends at
   * {@code i}: that key's rows from it to {@code i} are every slot between. */
  public int runFrom(int i) {
    int r = runs[i];
    return r >= start ? r : start;
  }

  /** The live row of the same key before row {@code i}; -1: none. */
  public int next(int i) {
    int o = older[i];
    return o >= start ? o : -1;
  }

  /** The table slot of {@code key}: its own, or the free one it would take. */
  int slot(long key) {
    int mask = heads.length - 1;
    // (Fibonacci hashing: a band's keys are consecutive buckets. The product's high half, so
    // that a table of any size up to an int's takes well-mixed bits.)
    int s = (int) ((key * 0x9E3779B97F4A7C15L) >>> 32) & mask;
    while (heads[s] != FREE && slotKeys[s] != key) {
      s = (s + 1) & mask;
    }
    return s;
  }

  /** Room for one more row: the dead rows' slots reclaimed, or the arrays doubled. */
  void reclaim() {
    int live = end - start;
    int cap = live * 2 > keys.length ? keys.length * 2 : keys.length;
    if (start == 0) {
      keys = java.util.Arrays.copyOf(keys, cap);
      times = java.util.Arrays.copyOf(times, cap);
      batches = java.util.Arrays.copyOf(batches, cap);
      buckets = java.util.Arrays.copyOf(buckets, cap);
      matched = java.util.Arrays.copyOf(matched, cap);
      decided = java.util.Arrays.copyOf(decided, cap);
      ids = java.util.Arrays.copyOf(ids, cap);
      rows = (InternalRow[]) java.util.Arrays.copyOf(rows, cap);
      older = java.util.Arrays.copyOf(older, cap);
      runs = java.util.Arrays.copyOf(runs, cap);
      spillAt = java.util.Arrays.copyOf(spillAt, cap);
      return;
    }
    long[] at = new long[cap];
    System.arraycopy(spillAt, start, at, 0, live);
    spillAt = at;
    for (int s = 0; s < spills.size(); s++) {  // (expiry dropped those wholly below start)
      SpillFile f = (SpillFile) spills.get(s);
      f.first = Math.max(f.first - start, 0);
      f.end -= start;
    }
    spilled = Math.max(spilled - start, 0);
    keys = moved(keys, live, cap);
    times = moved(times, live, cap);
    batches = moved(batches, live, cap);
    buckets = moved(buckets, live, cap);
    boolean[] m = new boolean[cap];
    System.arraycopy(matched, start, m, 0, live);
    matched = m;
    decided = moved(decided, live, cap);
    ids = moved(ids, live, cap);
    InternalRow[] r = new InternalRow[cap];
    System.arraycopy(rows, start, r, 0, live);
    rows = r;
    if (columns != null) {
      columns.resize(cap, start, live);
    }
    older = new int[cap];
    runs = new int[cap];
    start = 0;
    end = live;
    slotKeys = new long[tableSize(live)];
    heads = free(slotKeys.length);
    used = 0;
    for (int i = 0; i < end; i++) {
      link(i);
    }
  }

  /** The {@code live} values of {@code a} from slot {@code start} on, at 0 of an array of
   * {@code cap}. */
  long[] moved(long[] a, int live, int cap) {
    long[] to = new long[cap];
    System.arraycopy(a, start, to, 0, live);
    return to;
  }

  /** The table made again for the keys with live rows only ({@link #tableSize}). */
  void rehash() {
    long[] oldKeys = slotKeys;
    int[] oldHeads = heads;
    int live = 0;
    for (int s = 0; s < oldHeads.length; s++) {
      if (oldHeads[s] >= start) {
        live++;
      }
    }
    slotKeys = new long[tableSize(live + 1)];
    heads = free(slotKeys.length);
    used = 0;
    for (int s = 0; s < oldHeads.length; s++) {
      if (oldHeads[s] >= start) {
        int to = slot(oldKeys[s]);
        slotKeys[to] = oldKeys[s];
        heads[to] = oldHeads[s];
        used++;
      }
    }
  }

  /** A power of two at least four times {@code keys}: the table stays at most half full
   * until it is made again. */
  static int tableSize(int keys) {
    int n = 32;
    while (n < 4 * keys) {
      n *= 2;
    }
    return n;
  }
}
