package streamjoin.operator;

import java.util.Iterator;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What a probe counts for the driver, per probe {@code name + "@" + batch}: each task's delta
 * rows per unit of the skew check, and a shedding probe's pairs per direction, written and
 * missed, after them ({@link IndexProbe#cuts}). In local mode the driver's JVM ran the tasks and
 * reads them here; on a cluster the executors send them back ({@link PlacedIndex#gather}).
 * Written for janino: no lambdas, raw collections.
 */
final class ProbeCounts {
  private ProbeCounts() {}

  /** Per probe, each task's counts by a partition it read (a task or stage run again replaces
   * its counts). */
  static final ConcurrentHashMap COUNTS = new ConcurrentHashMap();

  /** The counts of the probe of batch {@code batch} of {@code name} (both sides; zeros where
   * it counted none), forgotten once read; comma-separated, one string for one call from Python
   * (an array's values are a call each). */
  static String read(String name, long batch, int units) {
    long[] total = new long[units];
    java.util.Map tasks = PlacedIndex.gather(name, batch);
    if (tasks == null) {
      tasks = (ConcurrentHashMap) COUNTS.remove(name + "@" + batch);
    }
    if (tasks != null) {
      Iterator it = tasks.values().iterator();
      while (it.hasNext()) {
        long[] c = (long[]) it.next();
        for (int u = 0; u < units && u < c.length; u++) {
          total[u] += c[u];
        }
      }
    }
    forget(COUNTS, name);
    forget(PlacedIndex.COUNTED, name);
    StringBuilder text = new StringBuilder();
    for (int u = 0; u < units; u++) {
      text.append(u == 0 ? "" : ",").append(total[u]);
    }
    return text.toString();
  }

  /** Drops the entries of {@code name}'s probes from {@code counts} (a failed batch's counts,
   * never read). */
  static void forget(ConcurrentHashMap counts, String name) {
    Iterator keys = counts.keySet().iterator();
    while (keys.hasNext()) {
      if (((String) keys.next()).startsWith(name + "@")) {
        keys.remove();
      }
    }
  }
}
