package streamjoin.operator;

import java.util.concurrent.ConcurrentHashMap;

/**
 * The matched marks that an outer join's row shares with its other copies, per index name: the
 * identities ({@link IndexRows#rowId}) of the rows with several copies that a partner matched
 * (an outer join's under a scheme, time buckets, a band's runs or an OR's tables). A copy's match
 * marks them all, and the row's first stored copy decides it (the others are {@code copy}). One
 * JVM holds every partition (the driver's, in local mode), so each copy's probe reads them, in
 * one task or several; on a cluster each copy keeps its own mark, and the decision joins them
 * ({@link PlacedIndex#decide}). Equal rows of a side share an identity, and their matches: they
 * meet the same partners. Written for janino: no lambdas, raw collections.
 */
final class SharedMarks {
  private SharedMarks() {}

  static final ConcurrentHashMap MARKS = new ConcurrentHashMap();

  /** The indexes whose rows' marks are shared, as an index that drains beside them marks
   * their rows too (an outer join's, after its placement changed): until dropped. */
  static final java.util.Set SHARING = ConcurrentHashMap.newKeySet();

  /** Whether an outer join's rows ({@code marker} not null) of an input whose {@code fields}
   * are given have several copies, whose marks are joined: placed rows, or an OR's tables. */
  static boolean used(BatchInput marker, int[] fields) {
    return marker != null && (fields[IndexRows.STORES] >= 0 || fields[IndexRows.TAB] >= 0);
  }

  /** {@link #used} by index {@code name}, or one whose rows' matches are also found by the
   * probe of an index that drains beside it ({@link #share}). */
  static boolean used(BatchInput marker, int[] fields, String name) {
    return used(marker, fields) || (marker != null && SHARING.contains(name));
  }

  /** Index {@code name}'s rows keep their marks in the shared marks (see {@link #SHARING}). */
  static void share(String name) {
    SHARING.add(name);
  }

  /** Index {@code name}'s new rows no longer need shared marks (the index that drained beside
   * it is gone): their matches mark them in place, and the shared marks it has stay, read by
   * its decisions, until their rows expire. */
  static void unshare(String name) {
    SHARING.remove(name);
  }

  /** The shared marks of index {@code name}, made where {@code make} and there are none. */
  static java.util.Set of(String name, boolean make) {
    java.util.Set had = (java.util.Set) MARKS.get(name);
    if (had != null || !make) {
      return had;
    }
    java.util.Set made = ConcurrentHashMap.newKeySet();
    had = (java.util.Set) MARKS.putIfAbsent(name, made);
    return had == null ? made : had;
  }

  /** Forgets index {@code name}'s marks. */
  static void drop(String name) {
    MARKS.remove(name);
    SHARING.remove(name);
  }

  /** Index {@code from}'s marks become {@code to}'s (an index that drains: its rows' marks go
   * with them). */
  static void rename(String from, String to) {
    Object marks = MARKS.remove(from);
    if (marks != null) {
      MARKS.put(to, marks);
    }
    if (SHARING.remove(from)) {
      SHARING.add(to);
    }
  }
}
