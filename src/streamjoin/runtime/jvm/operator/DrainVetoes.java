package streamjoin.operator;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.util.CollectionAccumulator;

/**
 * In the driver, an outer join's matches that an index draining on a cluster's executors found
 * for rows stored in the new index beside it, on other executors ({@link PlacedIndex#drain}):
 * each such row is matched, and its decision in the new index is vetoed ({@link #take}, which
 * {@link PlacedIndex#decide} ships to the deciding tasks). Written for janino: no lambdas, raw
 * collections.
 */
public final class DrainVetoes {
  private DrainVetoes() {}

  /** Per new index (by name), the accumulators of the drain's probes, whose tasks sent the
   * batch's rows that met a drained row ({side, identity, event time} each); read into {@link
   * #HELD} by the index's next decision (its probes' jobs have run by then: a batch's pairs
   * are computed before its rows are decided). */
  static final ConcurrentHashMap SENT = new ConcurrentHashMap();

  /** Per such index: per side, the identity and event time of each of its rows that a drained
   * row matched, until a decision below that time takes it. */
  static final ConcurrentHashMap HELD = new ConcurrentHashMap();

  static final AtomicLong RECEIVED = new AtomicLong();

  /** The accumulator {@code sent} of a drain's probe will hold matches of index {@code into}'s
   * rows. */
  static void expect(String into, CollectionAccumulator sent) {
    SENT.putIfAbsent(into, new ConcurrentLinkedQueue());
    ((Queue) SENT.get(into)).add(sent);
  }

  /** The identities of index {@code name}'s rows of side {@code side} below event time {@code
   * below} that a drained row matched, forgotten here: the decision that takes them is the last
   * that could meet them (a batch that fails on a cluster builds its indexes again, under new
   * names); null where no drain sent any. */
  static synchronized long[] take(String name, int side, long below) {
    HashMap[] sides = (HashMap[]) HELD.get(name);
    Queue pending = (Queue) SENT.get(name);
    for (Object acc = pending == null ? null : pending.poll();
        acc != null;
        acc = pending.poll()) {
      if (sides == null) {
        sides = new HashMap[] {new HashMap(), new HashMap()};
        HELD.put(name, sides);
      }
      List sent = ((CollectionAccumulator) acc).value();
      for (int i = 0; i < sent.size(); i++) {
        long[] met = (long[]) sent.get(i);
        for (int j = 0; j + 2 < met.length; j += 3) {
          sides[(int) met[j]].put(Long.valueOf(met[j + 1]), Long.valueOf(met[j + 2]));
          RECEIVED.incrementAndGet();
        }
      }
    }
    if (sides == null) {
      return null;
    }
    ArrayList out = new ArrayList();
    Iterator it = sides[side].entrySet().iterator();
    while (it.hasNext()) {
      Map.Entry e = (Map.Entry) it.next();
      if (((Long) e.getValue()).longValue() < below) {
        out.add(e.getKey());
        it.remove();
      }
    }
    long[] ids = new long[out.size()];
    for (int i = 0; i < ids.length; i++) {
      ids[i] = ((Long) out.get(i)).longValue();
    }
    return ids;
  }

  /** Whether a drain sent matches of index {@code name}'s rows that no decision has taken yet
   * (a drain that ended may leave some, for rows still undecided): its rows are then decided
   * by {@link PlacedIndex#decide}, which applies them, not in its probe's tasks. */
  public static synchronized boolean pending(String name) {
    Queue sent = (Queue) SENT.get(name);
    HashMap[] sides = (HashMap[]) HELD.get(name);
    return (sent != null && !sent.isEmpty())
        || (sides != null && (!sides[0].isEmpty() || !sides[1].isEmpty()));
  }

  /** Index {@code name} is dropped: what was sent for it goes. */
  static void forget(String name) {
    SENT.remove(name);
    HELD.remove(name);
  }

  /** The matches the driver has received from drains since it started (a task run again sends
   * its own again): what a test reads to know that a drain's pairs crossed the indexes. */
  public static long received() {
    return RECEIVED.get();
  }
}
