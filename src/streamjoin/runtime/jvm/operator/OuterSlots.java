package streamjoin.operator;

/**
 * An outer join's marks on the slots of one {@link IndexSide}: whether a partner matched each
 * row, the batch that decided one without (or {@link IndexSide#NOT_DECIDED}), and a row's
 * identity in the index's shared marks where it has several copies. An inner join never makes
 * them: the side makes them at the first mark that is not the default, so that an inner join's
 * slot keeps only what its probe reads. Written for janino: no lambdas, no generics.
 */
final class OuterSlots {
  boolean[] matched;
  long[] decided;
  long[] ids;

  /** Slots of {@code capacity} as they were before any mark: none matched, none decided. */
  OuterSlots(int capacity) {
    matched = new boolean[capacity];
    decided = new long[capacity];
    java.util.Arrays.fill(decided, IndexSide.NOT_DECIDED);
    ids = new long[capacity];
  }

  /** Slot {@code i} taken by a new row: not matched, not decided, no identity. */
  void reset(int i) {
    matched[i] = false;
    decided[i] = IndexSide.NOT_DECIDED;
    ids[i] = 0L;
  }

  /** The side's slots were moved: the {@code live} rows from slot {@code from} now start at
   * 0, in arrays of {@code capacity} (its reclaim). */
  void resize(int capacity, int from, int live) {
    boolean[] m = new boolean[capacity];
    System.arraycopy(matched, from, m, 0, live);
    matched = m;
    decided = IndexSide.moved(decided, from, live, capacity);
    ids = IndexSide.moved(ids, from, live, capacity);
  }

  /** The heap its arrays take. */
  long bytes() {
    return 17L * matched.length;
  }
}
