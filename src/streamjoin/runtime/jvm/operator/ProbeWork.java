package streamjoin.operator;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the join operator's probes did in this JVM since it started: the pairs of rows they
 * tested (each a candidate's evaluation of the join's predicate, or a pair kept without one),
 * and the CPU time of the threads while they found and made a probe's pairs ({@link
 * ProbePairs#fill}). A benchmark reads the totals before and after a run to rate the operator
 * itself, apart from the reads, writes and planning around it. Two reads of the thread's CPU
 * clock per chunk of pairs, none per pair.
 * Written for janino: no lambdas, no generics.
 */
public final class ProbeWork {
  private ProbeWork() {}

  static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
  static final AtomicLong PAIRS = new AtomicLong();
  static final AtomicLong NANOS = new AtomicLong();

  /** The calling thread's CPU time in nanoseconds (-1 where the JVM does not measure it). */
  static long cpu() {
    return THREADS.isCurrentThreadCpuTimeSupported() ? THREADS.getCurrentThreadCpuTime() : -1;
  }

  /** Adds {@code pairs} tested in the CPU time since {@code since} ({@link #cpu}'s). */
  static void add(long pairs, long since) {
    PAIRS.addAndGet(pairs);
    if (since >= 0) {
      NANOS.addAndGet(cpu() - since);
    }
  }

  /** The pairs tested and the CPU nanoseconds spent, since the JVM started: {@code
   * "pairs,nanos"} (one string for one call from Python). */
  public static String totals() {
    return PAIRS.get() + "," + NANOS.get();
  }
}
