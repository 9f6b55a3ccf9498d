package streamjoin.operator;

import java.util.ArrayList;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;

/**
 * An outer join's part of an {@link IndexProbe}: the matched marks its ON condition sets on
 * the pairs the probe finds, and the rows its partitions' sides decide without a partner. Written
 * for janino: no lambdas, raw collections.
 */
final class OuterMarks {
  private OuterMarks() {}

  /** Marks {@code d} and row {@code j} of {@code other} matched where probe {@code p}'s outer
   * join's ON condition holds on their pair. */
  static void mark(
      IndexProbe p, IndexRows.Entry d, IndexSide other, int j, boolean left, boolean tabbed) {
    if (p.on == null) {
      p.on = new BasePredicate[] {p.marker.test()};
    }
    if (p.on[0] != null && !p.on[0].eval(p.candidate(d, other.row(j), left, tabbed))) {
      return;
    }
    java.util.Set mine = p.deltaMarks != null ? p.deltaMarks : p.marks;
    if (mine != null && !d.matched) {
      mine.add(Long.valueOf(d.id));
      if (p.met != null && (p.sendsMet & (left ? 1 : 2)) != 0) {
        p.met.add(new long[] {left ? 0 : 1, d.id, d.ts});
      }
    }
    if (p.marks != null && !other.matched(j)) {
      p.marks.add(Long.valueOf(other.id(j)));
    }
    d.matched = true;
    other.match(j);
  }

  /** The rows without a partner that every partition of probe {@code p} decides (the task
   * holds them all, or its one partition {@code only}), as pairs whose other side is NULL,
   * where the outer join's WHERE holds ({@code alone}). */
  static ArrayList unmatched(IndexProbe p) {
    ArrayList out = new ArrayList();
    BasePredicate where = p.alone.test();
    boolean tabbed = p.fields[IndexRows.TAB] >= 0;
    for (int side = 0; side < 2; side++) {
      long below = p.below[side];
      if (below == Long.MIN_VALUE) {
        continue;
      }
      ArrayList pairs;
      if (p.only < 0) {
        pairs = alone(p.name, p.parts, side, below, p.batch, tabbed);
      } else {  // (a row has no copy in another partition: PlacedIndex#probe)
        pairs = new ArrayList();
        IndexPart part = JoinIndex.part(p.name, p.only);
        synchronized (part) {
          aloneIn(part, side, below, p.batch, null, tabbed, pairs, false);
        }
      }
      for (int i = 0; i < pairs.size(); i++) {
        InternalRow pair = (InternalRow) pairs.get(i);
        if (where == null || where.eval(pair)) {
          out.add(pair);
        }
      }
    }
    return out;
  }

  /** What {@link JoinIndex#decide} decides, as a list of pairs (in the JVM that holds the
   * partitions); {@code tabbed}: with the table each was decided in, as an OR's pairs have it. */
  static ArrayList alone(
      String name, int parts, int side, long below, long batch, boolean tabbed) {
    ArrayList rows = new ArrayList();
    java.util.Set marks = SharedMarks.of(name, false);
    for (int p = 0; p < parts; p++) {
      IndexPart part = JoinIndex.part(name, p);
      synchronized (part) {
        aloneIn(part, side, below, batch, marks, tabbed, rows, false);
      }
    }
    return rows;
  }

  /** {@link #alone} of one partition {@code part}, added to {@code rows}; {@code vetoes}: with
   * each row's identity last, and the copies' vetoes ({@link #decide}). */
  static void aloneIn(
      IndexPart part, int side, long below, long batch, java.util.Set marks, boolean tabbed,
      ArrayList rows, boolean vetoes) {
    for (int t = 0; t < part.tables.length; t++) {
      ArrayList ids = vetoes ? new ArrayList() : null;
      ArrayList alone = OuterMarks.decide(part.tables[t][side], below, batch, marks, ids);
      for (int i = 0; i < alone.size(); i++) {
        int width = (tabbed ? 3 : 2) + (vetoes ? 1 : 0);
        Object[] pair = new Object[width];  // (the other side NULL)
        pair[side] = alone.get(i);
        if (tabbed) {
          pair[2] = Integer.valueOf(t);
        }
        if (vetoes) {
          pair[width - 1] = ids.get(i);
        }
        rows.add(new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(pair));
      }
    }
    if (!vetoes) {
      return;
    }
    java.util.Iterator it = part.probedMatches[side].entrySet().iterator();
    while (it.hasNext()) {
      java.util.Map.Entry e = (java.util.Map.Entry) it.next();
      if (((Long) e.getValue()).longValue() < below) {
        Object[] pair = new Object[(tabbed ? 3 : 2) + 1];
        if (tabbed) {
          pair[2] = Integer.valueOf(0);
        }
        pair[pair.length - 1] = e.getKey();
        rows.add(new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(pair));
      }
    }
  }

  /** The live rows of side {@code s} below event time {@code below} that no partner matched
   * (nor one of another copy's, by the index's shared {@code marks}, if any) and no batch but
   * {@code batch} decided, now decided by it (an outer join's rows without a partner). Where
   * {@code vetoes} is not null, each such row's identity goes into it, then, for each live
   * copy below {@code below} that a partner matched, a NULL into the rows and its identity
   * into {@code vetoes}: on a cluster, where a row's copies keep their marks apart, a copy's
   * match vetoes the row its deciding copy found alone (again in each batch while it lives: a
   * batch run again decides the same). */
  static java.util.ArrayList decide(
      IndexSide s, long below, long batch, java.util.Set marks, java.util.ArrayList vetoes) {
    java.util.ArrayList out = new java.util.ArrayList();
    for (int i = s.start; i < s.end; i++) {
      long by = s.decided(i);
      boolean open = by == IndexSide.NOT_DECIDED || by == batch;
      if (s.times[i] < below && open) {
        s.decide(i, batch);
        if (!s.matched(i) && (marks == null || !marks.contains(Long.valueOf(s.id(i))))) {
          out.add(s.row(i));
          if (vetoes != null) {
            vetoes.add(Long.valueOf(s.id(i)));
          }
        }
      } else if (vetoes != null && s.times[i] < below && by == IndexSide.COPY
          && s.matched(i)) {
        out.add(null);
        vetoes.add(Long.valueOf(s.id(i)));
      }
    }
    return out;
  }

  /** Marks the live rows of side {@code s} below {@code below} decided by a batch before (a
   * rebuild's). */
  static void decidedBefore(IndexSide s, long below) {
    for (int i = s.start; i < s.end; i++) {
      if (s.times[i] < below && s.decided(i) != IndexSide.COPY) {
        s.decide(i, IndexSide.DECIDED_BEFORE);
      }
    }
  }
}
