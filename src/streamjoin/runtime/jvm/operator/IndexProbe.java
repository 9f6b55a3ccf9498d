package streamjoin.operator;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.XXH64;

/**
 * One task's probe of a {@link JoinIndex} with a batch's rows: it groups them by the index's
 * partition, counts them per unit where asked, and applies them to each partition (the delta
 * rule), returning the candidate pairs, or the rows a {@link BatchInput#output} makes of those
 * it keeps. Written for janino: no lambdas, raw collections.
 */
final class IndexProbe implements FlatMapFunction, Cloneable {
  final String name;
  final int parts;
  final long batch;
  final int[] fields;
  final int units;
  final BatchInput output;  // (null: the candidate pairs themselves)
  BatchInput marker;  // (an outer join's ON condition over a pair: a true one marks both rows)
  BatchInput alone;  // (an outer join's rows without a partner, decided after the probe)
  long[] below;  // (per side, the event time its rows are decided below, if `alone`)
  // (A placed task's partition, the only one whose rows it decides; -1: every partition, all
  // in the task's JVM. Set in the task's own copy: PlacedProbe.)
  int only = -1;
  // Shedding (`overload = 'shed'`): per side, a row probes where its hash with the batch's id,
  // modulo SHED_SCALE, is below the side's cut (null: every row probes). A row that skips its
  // probe is still stored. With countMissed, a skipped row's pairs are counted, not written.
  long[] cuts;
  boolean countMissed;
  // (false: the counts stay in the probe's `counts`, for a cluster's task to send back; else
  // they go to ProbeCounts.COUNTS, where the driver's JVM, which ran the task, reads them.)
  boolean keepsCounts = true;
  // (false: a row's copies keep their own marks, where they lie in several JVMs: a cluster's.)
  boolean marksInJvm = true;
  // (An index that drains after its query's placement changed: the batch's rows, placed as it
  // placed them, probe its rows and are kept in the new one; none is added here.)
  boolean drains;
  // (An outer join's drain: the index whose shared marks the batch's matched rows go to, the
  // new one they are stored in; null: none. By name, resolved in the task.)
  String marksInto;
  java.util.Set deltaMarks;
  // (An outer join's drain on a cluster, where the new index lies on other executors: the
  // batch's rows of the sides in this mask (bit 0 left, 1 right: those the join preserves) that
  // met the drained rows are sent back ({side, identity, event time} each, into `met` per
  // call), to veto their decisions there (DrainVetoes).)
  int sendsMet;
  ArrayList met;
  // (The batch's rows carry their identities: an index beside an outer join's drain on a
  // cluster, whose decisions the drain's matches veto by them.)
  boolean identified;
  static final long SHED_SCALE = 1000000L;
  // (Per call, in the task's own copy of the probe: the output's predicate, evaluated as each
  // pair is found, and the counts: rows per unit, then with shedding each side's pairs written
  // and each side's pairs its skipped rows would have found.)
  BasePredicate test;
  PairTest columnTest;  // (the predicate over the stored side's columns; then `test` is null)
  long[] counts;
  BasePredicate[] on;  // (the marker's predicate, made once; {null}: every pair)
  java.util.Set marks;  // (the marks a row's copies share: SharedMarks.MARKS; else null)
  Object[] scratch;
  GenericInternalRow scratchRow;
  // (One probing row's candidates, tested together: their slots, those kept, how many; the
  // stored side's columns, for columnTest.)
  static final int CANDIDATES = 1024;
  static final int LONG_RUN = 16;  // (a run of more slots is tested on its own: a call's worth)
  int[] slots;
  int[] kept;
  int candidates;
  Object[] cols;
  long tested;  // (pairs tested since ProbePairs last added them to ProbeWork's)

  IndexProbe(String name, int parts, long batch, int[] fields, int units, BatchInput output) {
    this.name = name;
    this.parts = parts;
    this.batch = batch;
    this.fields = fields;
    this.units = units;
    this.output = output;
  }

  public Iterator call(Object rows) {
    int shed = cuts == null ? 0 : 4;
    counts = units + shed > 0 ? new long[units + shed] : null;
    begin();
    boolean shared = SharedMarks.used(marker, fields, name);
    marks = shared && marksInJvm ? SharedMarks.of(name, true) : null;
    met = sendsMet != 0 ? new ArrayList() : null;
    deltaMarks =
        sendsMet != 0
            ? new java.util.HashSet()
            : marksInto == null ? null : SharedMarks.of(marksInto, true);
    shared = shared || deltaMarks != null || identified;  // (rows with their identities)
    HashMap found =
        IndexRows.byPart((Iterator) rows, parts, batch, fields, counts, units, shared);
    if (counts != null && keepsCounts && !found.isEmpty()) {
      // (By a partition the task read, which the task's number is not once a coalesce puts
      // several in one task; a task run again, or a stage computed again, replaces them.)
      String at = String.valueOf(found.keySet().iterator().next());
      ConcurrentHashMap tasks = new ConcurrentHashMap();
      Object had = ProbeCounts.COUNTS.putIfAbsent(name + "@" + batch, tasks);
      ((ConcurrentHashMap) (had == null ? tasks : had)).put(at, counts);
    }
    long since = ProbeWork.cpu();
    ArrayList stored = ProbePairs.store(this, found.entrySet().iterator());
    ProbeWork.add(0, since);  // (storing the batch's rows is the operator's work too)
    int ways = splits() ? ParallelPairs.ways(stored.size()) : 1;
    return ways > 1 ? new ParallelPairs(this, stored, ways) : new ProbePairs(this, stored);
  }

  /** The probe's own state for the calling thread: its tests and its candidates' buffers. */
  void begin() {
    columnTest = output == null ? null : output.pairTest();
    test = output == null || columnTest != null ? null : output.test();
    slots = new int[CANDIDATES];
    kept = new int[CANDIDATES];
  }

  /** Whether the task's partitions may be probed on several threads ({@link ParallelPairs}):
   * all in this JVM (a local master's), and nothing the threads would share (an outer join's
   * marks, a shed probe's counts). */
  boolean splits() {
    return only < 0 && marker == null && alone == null && cuts == null && sendsMet == 0
        && marksInto == null;
  }

  /** A copy of this probe for a worker of {@link ParallelPairs}, which makes its own state
   * ({@link #begin}) on its thread. */
  IndexProbe worker() {
    try {
      IndexProbe copy = (IndexProbe) clone();
      copy.tested = 0;
      copy.scratch = null;
      copy.scratchRow = null;
      return copy;
    } catch (CloneNotSupportedException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Probes and extends one partition with its rows of the batch (the delta rule), its pairs
   * into {@code out}: what {@link ProbePairs} does a chunk at a time. */
  void apply(IndexPart part, ArrayList[] delta, ArrayList out) {
    if (slots == null) {  // (a probe not called: a rebuild's, IndexLoad#into)
      begin();
    }
    synchronized (part) {
      int[][] older = store(part, delta);
      for (int side = 0; side < 2; side++) {
        for (int i = 0; i < delta[side].size(); i++) {
          find((IndexRows.Entry) delta[side].get(i), part, 1 - side, older, out);
        }
      }
      settle(part, delta);
    }
  }

  /** Stores the batch's rows {@code delta} in {@code part} before any probes (an index that
   * drains stores none), and returns, per table and side, the slot its first new row took:
   * a new right row probes only the left rows below it, so that a new pair of rows is found
   * once, by the left one's probe. */
  int[][] store(IndexPart part, ArrayList[] delta) {
    if (!drains) {
      if (part.version == batch) {
        part.undo(batch);
      } else if (part.version > batch) {
        throw new IllegalStateException(
            "streamjoin: index " + name + " is at batch " + part.version + ", past " + batch);
      }
      part.version = batch;  // (before its rows are added: a rerun takes them back)
      part.addStored(delta[0], 0);
      part.addStored(delta[1], 1);
    }
    int[][] first = new int[part.tables.length][2];
    for (int t = 0; t < part.tables.length; t++) {
      first[t][0] = part.tables[t][0].end;
      first[t][1] = part.tables[t][1].end;
    }
    if (!drains) {
      for (int side = 0; side < 2; side++) {
        for (int i = 0; i < delta[side].size(); i++) {
          IndexRows.Entry e = (IndexRows.Entry) delta[side].get(i);
          if (e.store) {
            first[e.tab][side]--;  // (a side's new rows are its newest slots)
          }
        }
      }
    }
    return first;
  }

  /** After every probe of {@code part} by the batch's rows {@code delta}: an outer join's
   * matches of the new rows marked in their slots, or, of copies that only probe here, kept as
   * vetoes; then the oldest rows spilled where the partition is over its memory. */
  void settle(IndexPart part, ArrayList[] delta) {
    if (drains) {
      return;
    }
    if (marker != null) {
      part.syncMatched(delta[0], 0);
      part.syncMatched(delta[1], 1);
    }
    if (marker != null && marks == null && SharedMarks.used(marker, fields)) {
      part.probedMatched(delta[0], 0);  // (copies marked apart: `decide`'s vetoes)
      part.probedMatched(delta[1], 1);
    }
    part.fit();
  }

  /** The pairs of probing row {@code d} with the rows of side {@code other} of its table of
   * {@code part} of its key, or, a band's, of its key in each bucket of its range (for one
   * equality key, each bucket is a key of its own: each pair is found once); a right row's
   * only with the left rows below slot {@code older} of its table (those of earlier batches). */
  void find(IndexRows.Entry d, IndexPart part, int other, int[][] older, ArrayList out) {
    if (!d.probe) {
      return;
    }
    boolean left = other == 1;
    boolean tabbed = fields[IndexRows.TAB] >= 0;
    d.skips = skips(d.row, 1 - other);
    if (d.skips && !countMissed) {
      return;
    }
    IndexSide them = part.side(d.tab, other);
    if (columnTest != null) {
      if (left) {
        columnTest.probeLeft(d.row);
      } else {
        columnTest.probeRight(d.row);
      }
      cols = SideColumns.of(them, columnTest.reads[other], columnTest.types[other]).arrays;
    }
    int below = left ? Integer.MAX_VALUE : d.tab < older.length ? older[d.tab][0] : them.end;
    candidates = 0;
    if (!d.ranged) {
      pairs(d, them, them.first(d.key), below, left, tabbed, out);
    } else if (d.hi >= d.lo) {  // (else an empty range: a NULL band value's, say)
      long span = d.hi - d.lo;  // (negative: past a long's range)
      // (A lookup a bucket, or a pass over the side's rows, whichever reads fewer: a band of
      // fine buckets, in a partition of a few keys, looks each up.)
      if (span >= 0 && span < Math.max(them.keyCount(), them.size())) {
        // (Stops at hi itself: a range that ends at the largest long would wrap past it.)
        for (long b = d.lo; ; b++) {
          pairs(d, them, them.first(IndexRows.mix(d.eq, b)), below, left, tabbed, out);
          if (b == d.hi) {
            break;
          }
        }
      } else {
        // (A range of more buckets than the other side holds keys and rows, a tiny band's
        // near the ends of the doubles: a pass over the side's live rows, never a loop over
        // the range.)
        int end = Math.min(them.end, below);
        for (int j = them.start; j < end; j++) {
          long b = them.bucket(j);
          if (b >= d.lo && b <= d.hi && them.keys[j] == IndexRows.mix(d.eq, b)) {
            collect(d, them, j, left, tabbed, out);
          }
        }
      }
    }
    tested(d, them, left, tabbed, out);
  }

  /** The pairs of {@code d} with row {@code j} of {@code other} and the older rows of its key,
   * those below slot {@code below}: a run of consecutive slots at a time ({@link
   * IndexSide#runFrom}), the newest run first. */
  void pairs(
      IndexRows.Entry d,
      IndexSide other,
      int j,
      int below,
      boolean left,
      boolean tabbed,
      ArrayList out) {
    // (Without outer marks, a long run is tested over its slots as they lie, a chunk at a time;
    // a short one, a scattered key's row, joins the list of candidates tested together.)
    boolean inRuns = columnTest != null && marker == null;
    while (j >= 0) {
      int from = other.runFrom(j);
      int last = Math.min(j, below - 1);
      if (inRuns && last - from >= LONG_RUN) {
        for (int a = from; a <= last; a += CANDIDATES) {
          int to = Math.min(last + 1, a + CANDIDATES);
          tested += to - a;
          int n = left
              ? columnTest.keepRightRun(cols, a, to, kept)
              : columnTest.keepLeftRun(cols, a, to, kept);
          emit(d, other, kept, n, left, tabbed, out);
        }
      } else {
        for (int k = last; k >= from; ) {
          int stop = Math.max(from, k - (slots.length - candidates) + 1);
          for (; k >= stop; k--) {
            slots[candidates++] = k;
          }
          if (candidates == slots.length) {
            tested(d, other, left, tabbed, out);
          }
        }
      }
      j = other.next(from);
    }
  }

  /** Row {@code j} of {@code other} is a candidate partner of {@code d}: tested with the
   * others found before it, a run of them at a time ({@link #tested}). */
  void collect(
      IndexRows.Entry d, IndexSide other, int j, boolean left, boolean tabbed, ArrayList out) {
    slots[candidates++] = j;
    if (candidates == slots.length) {
      tested(d, other, left, tabbed, out);
    }
  }

  /** The pairs of {@code d} with the candidates found since the last call, into {@code out}
   * where the query's predicate holds on them; both rows of each marked matched where an outer
   * join's ON condition holds on it. A pair of a row that skipped its probe is only counted. */
  void tested(IndexRows.Entry d, IndexSide other, boolean left, boolean tabbed, ArrayList out) {
    int n = candidates;
    candidates = 0;
    tested += n;
    if (marker != null) {
      for (int i = 0; i < n; i++) {
        OuterMarks.mark(this, d, other, slots[i], left, tabbed);
      }
    }
    int[] keep = slots;
    if (columnTest != null) {
      n = left
          ? columnTest.keepRight(cols, slots, n, kept)
          : columnTest.keepLeft(cols, slots, n, kept);
      keep = kept;
    }
    emit(d, other, keep, n, left, tabbed, out);
  }

  /** The pairs of {@code d} with the stored rows at slots {@code keep[0..n)} that the generated
   * test kept (without one, those Spark's predicate keeps), into {@code out}; a shed's counted. */
  void emit(
      IndexRows.Entry d,
      IndexSide other,
      int[] keep,
      int n,
      boolean left,
      boolean tabbed,
      ArrayList out) {
    for (int i = 0; i < n; i++) {
      InternalRow o = other.row(keep[i]);
      if (test != null && !test.eval(candidate(d, o, left, tabbed))) {
        continue;
      }
      if (cuts != null) {
        counts[units + (d.skips ? 2 : 0) + (left ? 0 : 1)]++;
      }
      if (!d.skips) {
        out.add(ProbePairs.pair(d, o, left, tabbed));
      }
    }
  }

  /** The pair of {@code d} with stored row {@code o} in one row this probe reuses, for Spark's
   * predicates to test (only a pair kept is made, by {@link ProbePairs#pair}). */
  InternalRow candidate(IndexRows.Entry d, InternalRow o, boolean left, boolean tabbed) {
    if (scratch == null) {
      scratch = new Object[3];
      scratchRow = new GenericInternalRow(scratch);
    }
    scratch[0] = left ? d.row : o;
    scratch[1] = left ? o : d.row;
    scratch[2] = tabbed ? Integer.valueOf(d.tab) : null;
    return scratchRow;
  }

  /** Whether a row {@code row} of side {@code side} skips its probe (shedding): the same
   * choice for the same row in the same batch, a rerun's too. */
  boolean skips(InternalRow row, int side) {
    if (cuts == null || cuts[side] >= SHED_SCALE) {
      return false;
    }
    long h;
    if (row instanceof UnsafeRow) {
      UnsafeRow u = (UnsafeRow) row;
      h = XXH64.hashUnsafeBytes(u.getBaseObject(), u.getBaseOffset(), u.getSizeInBytes(), batch);
    } else {
      h = XXH64.hashLong(row.hashCode(), batch);
    }
    return Math.floorMod(h, SHED_SCALE) >= cuts[side];
  }
}
