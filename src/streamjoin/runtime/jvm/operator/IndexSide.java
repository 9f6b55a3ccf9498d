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
 * <p>Over the JVM's memory budget ({@link IndexPart#fit}), the oldest rows' bytes spill
 * to files ({@link #spillTo}, {@link SpilledRows}): their slots stay, {@code rows[i]} is null,
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
  InternalRow[] rows = new InternalRow[16];
  int[] older = new int[16];  // (the same key's next older row; -1: none)
  // Columns only some shapes read, made at their first value that is not the default (null:
  // every slot holds it): an inner equi join's slot keeps the five arrays above. A band row's
  // own bucket, for a probe of a wide range (default 0). The first slot of the run of
  // consecutive slots of row i's key that ends at i (default i: made once two consecutive rows
  // share a key): a band's time bucket arrives in runs, so a probe takes a run of its rows
  // without walking them. An outer join's marks.
  long[] buckets;
  int[] runs;
  OuterSlots outer;
  SideColumns columns;  // (the columns a probe's PairTest reads; null: none asked)
  int start;
  int end;
  long held;  // (bytes of the rows held in memory, as `bytesOf` counts them)
  final SpilledRows spilled = new SpilledRows();

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
    if (e.matched || e.id != 0L || e.copy) {
      OuterSlots o = outer();
      o.matched[e.at] = e.matched;
      o.ids[e.at] = e.id;
      if (e.copy) {
        o.decided[e.at] = COPY;
      }
    }
  }

  /** The outer join's marks, made where none was set yet. */
  OuterSlots outer() {
    if (outer == null) {
      outer = new OuterSlots(keys.length);
    }
    return outer;
  }

  /** Whether a partner matched row {@code i} (an outer join's). */
  public boolean matched(int i) {
    return outer != null && outer.matched[i];
  }

  /** Marks row {@code i} matched. */
  public void match(int i) {
    outer().matched[i] = true;
  }

  /** The batch that decided row {@code i} without a partner, or {@link #NOT_DECIDED}, {@link
   * #DECIDED_BEFORE}, {@link #COPY}. */
  long decided(int i) {
    return outer == null ? NOT_DECIDED : outer.decided[i];
  }

  void decide(int i, long batch) {
    outer().decided[i] = batch;
  }

  /** Row {@code i}'s identity in the index's shared marks (0: it has none). */
  long id(int i) {
    return outer == null ? 0L : outer.ids[i];
  }

  /** Row {@code i}'s own bucket (a band's; 0 for another row). */
  public long bucket(int i) {
    return buckets == null ? 0L : buckets[i];
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
    if (buckets != null || bucket != 0L) {
      if (buckets == null) {
        buckets = new long[keys.length];
      }
      buckets[i] = bucket;
    }
    times[i] = ts;
    batches[i] = batch;
    rows[i] = row;
    if (columns != null) {
      columns.set(i, row);
    }
    held += bytesOf(row);
    if (outer != null) {
      outer.reset(i);
    }
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
    int run = older[i] >= 0 && older[i] == i - 1 ? (runs == null ? i - 1 : runs[i - 1]) : i;
    if (run != i && runs == null) {  // (the first run: every slot before was its own)
      runs = new int[keys.length];
      for (int k = 0; k < runs.length; k++) {
        runs[k] = k;
      }
    }
    if (runs != null) {
      runs[i] = run;
    }
    heads[s] = i;
  }

  /** Drops the rows older than {@code least} from the oldest arrived on (a row that arrived
   * after a younger one waits for it: it can meet no new row, and the predicate drops it);
   * a deciding copy's mark leaves the index's shared {@code marks} (if any) with it. */
  public void expire(long least, java.util.Set marks) {
    while (start < end && times[start] < least) {
      if (marks != null && decided(start) != COPY) {
        marks.remove(Long.valueOf(id(start)));
      }
      forget(start);
      rows[start++] = null;
    }
    spilled.expired(start);
  }

  /** Row {@code i}'s bytes leave the count, in memory or spilled. */
  void forget(int i) {
    if (rows[i] != null) {
      held -= bytesOf(rows[i]);
    } else {
      spilled.forget(i);
    }
  }

  /** The heap a row held in memory takes, about: its bytes and its objects. */
  static long bytesOf(InternalRow row) {
    return row instanceof UnsafeRow ? ((UnsafeRow) row).getSizeInBytes() + 48L : 256L;
  }

  /** Live rows spilled to files. */
  public int spilledRows() {
    return spilled.live;
  }

  /** Spills the oldest rows still in memory, until those left hold at most {@code keep} bytes
   * (or none is left to spill), in new files of at most {@link SpillFile#MOST_BYTES} each. */
  public void spillTo(long keep) {
    spilled.spill(this, keep);
  }

  /** Deletes the spill files: the side is dropped. */
  public void close() {
    spilled.close();
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
    spilled.undone(end);
  }

  /** Row {@code i} (a live one's index, from {@link #first} or {@link #next}). */
  public InternalRow row(int i) {
    InternalRow r = rows[i];
    return r != null ? r : spilled.read(i);
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
    if (runs == null) {
      return i;
    }
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

  /** Room for one more row: the dead rows' slots reclaimed, the arrays doubled, or halved
   * where a quarter of them would hold the live rows (a burst's arrays do not stay at its
   * size: after the move, the live rows take at most half of them). */
  void reclaim() {
    int live = end - start;
    int cap = live * 2 > keys.length ? keys.length * 2 : keys.length;
    while (cap > 16 && live * 4 < cap) {
      cap /= 2;
    }
    if (start == 0) {  // (then every slot is live: the arrays double)
      keys = java.util.Arrays.copyOf(keys, cap);
      times = java.util.Arrays.copyOf(times, cap);
      batches = java.util.Arrays.copyOf(batches, cap);
      rows = (InternalRow[]) java.util.Arrays.copyOf(rows, cap);
      older = java.util.Arrays.copyOf(older, cap);
      if (buckets != null) {
        buckets = java.util.Arrays.copyOf(buckets, cap);
      }
      if (runs != null) {
        runs = java.util.Arrays.copyOf(runs, cap);
      }
      if (outer != null) {
        outer.resize(cap, 0, live);
      }
      spilled.resize(cap, 0, live);
      return;
    }
    spilled.resize(cap, start, live);
    keys = moved(keys, start, live, cap);
    times = moved(times, start, live, cap);
    batches = moved(batches, start, live, cap);
    if (buckets != null) {
      buckets = moved(buckets, start, live, cap);
    }
    if (outer != null) {
      outer.resize(cap, start, live);
    }
    InternalRow[] r = new InternalRow[cap];
    System.arraycopy(rows, start, r, 0, live);
    rows = r;
    if (columns != null) {
      columns.resize(cap, start, live);
    }
    older = new int[cap];
    runs = null;  // (made again by the links below where a run is left)
    start = 0;
    end = live;
    slotKeys = new long[tableSize(live)];
    heads = free(slotKeys.length);
    used = 0;
    for (int i = 0; i < end; i++) {
      link(i);
    }
  }

  /** The {@code live} values of {@code a} from slot {@code from} on, at 0 of an array of
   * {@code cap}. */
  static long[] moved(long[] a, int from, int live, int cap) {
    long[] to = new long[cap];
    System.arraycopy(a, from, to, 0, live);
    return to;
  }

  /** The heap its arrays take, about (compressed references): each slot's, the key table's,
   * and the columns' a probe reads. Spilling a row frees none of it: the slot stays until the
   * row expires. */
  public long slotBytes() {
    long perSlot = 8L * 3 + 4L * 2 + (buckets != null ? 8L : 0L) + (runs != null ? 4L : 0L);
    long bytes = perSlot * keys.length + 12L * heads.length + spilled.bytes();
    if (outer != null) {
      bytes += outer.bytes();
    }
    if (columns != null) {
      bytes += columns.bytes();
    }
    return bytes;
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
