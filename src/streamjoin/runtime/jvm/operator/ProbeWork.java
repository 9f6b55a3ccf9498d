package streamjoin.operator;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the join operator's probes did in this JVM since it started: the pairs of rows they
 * tested (each a candidate's evaluation of the join's predicate, or a pair kept without one),
 * and the CPU time of their threads while they stored a batch's rows ({@link IndexProbe#call})
 * and found and made its pairs, spills included ({@link ProbePairs#fill}). A rebuild's probes
 * ({@link IndexLoad#into}) are not counted. A benchmark reads the totals before and after
 * a run to rate the operator itself, apart from the reads, writes and planning around it. The
 * thread's CPU clock is read twice a task for storing and twice a chunk of pairs, never a pair.
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
