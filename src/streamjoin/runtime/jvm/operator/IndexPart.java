package streamjoin.operator;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;

/**
 * One partition of a {@link JoinIndex}: both sides, at the version of the last batch applied,
 * one pair of sides a table (an OR of equalities has a table for each of its keys). Written for
 * janino: no lambdas, raw collections.
 */
final class IndexPart {
  IndexSide[][] tables = new IndexSide[][] {{new IndexSide(), new IndexSide()}};
  long version;
  // (Per side, where a row's copies keep their marks apart (a cluster's): the identities of
  // the rows whose copy here only probes and met a partner, with their event time: kept until
  // they expire, they veto the row's deciding copy elsewhere, as a stored copy's match does.)
  HashMap[] probedMatches = new HashMap[] {new HashMap(), new HashMap()};

  /** Records the matches of the copies among {@code entries} (of side {@code side}) that
   * only probe here. */
  void probedMatched(ArrayList entries, int side) {
    for (int i = 0; i < entries.size(); i++) {
      IndexRows.Entry e = (IndexRows.Entry) entries.get(i);
      if (!e.store && e.matched) {
        probedMatches[side].put(Long.valueOf(e.id), Long.valueOf(e.ts));
      }
    }
  }

  // (The bytes of state every partition in this JVM may hold in memory together, its rows and
  // their slots: past it, a partition's oldest rows spill (`fit`). Below 0: three tenths of the
  // heap.)
  long memory = -1L;
  // (What this partition held at its last fit or expiry: the JVM's partitions' sum is weighed
  // against the budget. Read by other partitions' tasks without its lock: a batch old at worst.)
  volatile long footprint;

  IndexPart(long version) {
    this.version = version;
  }

  IndexPart(long version, long memory) {
    this.version = version;
    this.memory = memory;
  }

  /** The bytes of state the JVM's partitions, every index's, may hold in memory together. */
  long budget() {
    return memory < 0 ? Runtime.getRuntime().maxMemory() / 10 * 3 : memory;
  }

  /** The state the JVM's partitions held at their last fits: {@link #footprint}'s sum. */
  static long heldInJvm() {
    long n = 0;
    Iterator it = JoinIndex.PARTS.values().iterator();
    while (it.hasNext()) {
      n += ((IndexPart) it.next()).footprint;
    }
    return n;
  }

  /** Spills the oldest rows of each side where the JVM's partitions together hold more than
   * the budget: their rows in memory and their slots' arrays, which a spill does not free (a
   * row's slot stays until it expires). This partition's part of the budget is in proportion to
   * what it holds (a large join's partition keeps more than a small one's), and never below an
   * even share (a partition no batch reaches, which keeps its rows, cannot push the others' to
   * nothing). Its rows may keep three quarters of that part less its slots; they spill down to
   * it once they pass it by a quarter of the part, each side its share, so that a spill writes
   * at least a quarter of the part's rows in one file, even where the slots take the whole part. */
  void fit() {
    long held = heldNow();
    long slots = slotsNow();
    footprint = held + slots;
    long total = heldInJvm();
    long budget = budget();
    if (total <= budget || held == 0) {
      return;
    }
    long even = budget / Math.max(JoinIndex.PARTS.size(), 1);
    long part = Math.max((long) ((double) footprint / total * budget), even);
    long keep = Math.max(part / 4 * 3 - slots, 0L);
    if (held <= keep + part / 4) {
      return;
    }
    for (int t = 0; t < tables.length; t++) {
      for (int side = 0; side < 2; side++) {
        IndexSide s = tables[t][side];
        s.spillTo((long) ((double) s.held / held * keep));
      }
    }
    footprint = heldNow() + slotsNow();  // (a first spill made the slots' file places)
  }

  /** Bytes of the sides' slots' arrays. */
  long slotsNow() {
    long n = 0;
    for (int t = 0; t < tables.length; t++) {
      n += tables[t][0].slotBytes() + tables[t][1].slotBytes();
    }
    return n;
  }

  /** Bytes of the rows held in memory, every side. */
  long heldNow() {
    long n = 0;
    for (int t = 0; t < tables.length; t++) {
      n += tables[t][0].held + tables[t][1].held;
    }
    return n;
  }

  /** Live rows spilled, both sides. */
  long spilledRows() {
    long n = 0;
    for (int t = 0; t < tables.length; t++) {
      n += tables[t][0].spilledRows() + tables[t][1].spilledRows();
    }
    return n;
  }

  /** Deletes its spill files: the partition is dropped. */
  void close() {
    for (int t = 0; t < tables.length; t++) {
      tables[t][0].close();
      tables[t][1].close();
    }
  }

  /** Side {@code side} of table {@code tab}, made where it is not yet. */
  IndexSide side(int tab, int side) {
    if (tab >= tables.length) {
      IndexSide[][] more = new IndexSide[tab + 1][];
      System.arraycopy(tables, 0, more, 0, tables.length);
      for (int t = tables.length; t <= tab; t++) {
        more[t] = new IndexSide[] {new IndexSide(), new IndexSide()};
      }
      tables = more;
    }
    return tables[tab][side];
  }

  /** Each side's rows below {@code left} and {@code right} count as decided (a rebuild's:
   * the committed watermark decided them). */
  void decidedBefore(long left, long right) {
    for (int t = 0; t < tables.length; t++) {
      OuterMarks.decidedBefore(tables[t][0], left);
      OuterMarks.decidedBefore(tables[t][1], right);
    }
  }

  /** Adds the entries of {@code entries} (of side {@code side}) that are stored. */
  void addStored(ArrayList entries, int side) {
    for (int i = 0; i < entries.size(); i++) {
      IndexRows.Entry e = (IndexRows.Entry) entries.get(i);
      if (e.store) {
        side(e.tab, side).add(e);
      }
    }
  }

  /** The matches the probe found for the stored entries of {@code entries} (of side {@code
   * side}, the batch's newest rows of their tables), marked in their slots. */
  void syncMatched(ArrayList entries, int side) {
    int[] next = new int[tables.length];
    for (int i = 0; i < entries.size(); i++) {
      IndexRows.Entry e = (IndexRows.Entry) entries.get(i);
      if (e.store) {
        next[e.tab]++;
      }
    }
    for (int t = 0; t < tables.length; t++) {
      next[t] = tables[t][side].end - next[t];
    }
    for (int i = 0; i < entries.size(); i++) {
      IndexRows.Entry e = (IndexRows.Entry) entries.get(i);
      if (e.store) {
        int slot = next[e.tab]++;
        if (e.matched) {
          tables[e.tab][side].match(slot);
        }
      }
    }
  }

  void expire(long leftLeast, long rightLeast, java.util.Set marks) {
    for (int t = 0; t < tables.length; t++) {
      tables[t][0].expire(leftLeast, marks);
      tables[t][1].expire(rightLeast, marks);
    }
    footprint = heldNow() + slotsNow();
    long[] least = new long[] {leftLeast, rightLeast};
    for (int side = 0; side < 2; side++) {
      Iterator it = probedMatches[side].values().iterator();
      while (it.hasNext()) {
        if (((Long) it.next()).longValue() < least[side]) {
          it.remove();
        }
      }
    }
  }

  /** Every {@code step}-th live row's bucket of each table and side, into {@code text}. */
  void sample(int step, StringBuilder text) {
    for (int t = 0; t < tables.length; t++) {
      for (int side = 0; side < 2; side++) {
        IndexSide s = tables[t][side];
        for (int i = s.start; i < s.end; i += step) {
          text.append(text.length() == 0 ? "" : ",").append(s.bucket(i));
        }
      }
    }
  }

  void undo(long batch) {
    for (int t = 0; t < tables.length; t++) {
      tables[t][0].undo(batch);
      tables[t][1].undo(batch);
    }
  }

  long size() {
    long n = 0;
    for (int t = 0; t < tables.length; t++) {
      n += tables[t][0].size() + tables[t][1].size();
    }
    return n;
  }
}
