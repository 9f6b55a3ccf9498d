package streamjoin.operator;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;

/**
 * The pairs of one task's probe of several partitions, found on the cores of a local-mode
 * JVM, which holds every partition: a batch small enough for one task (it reads the rows
 * Spark planned, with no shuffle and no plan of its own) is still probed on every core. Each
 * worker probes its share of the partitions ({@link ProbePairs}, with its own {@link
 * IndexProbe#worker}), and hands its chunks of rows to the task's thread, which writes them.
 *
 * <p>Only an inner join's probe without shedding is split: an outer join's marks and a
 * shed probe's counts are the one probe's. The rows are stored in their partitions first, in
 * the task's thread. Once the task ends (killed, or its writer failed) a worker stops at its
 * next probing row ({@link ProbePairs#fill}), under its partition's lock, so that a rerun
 * storing there waits for it; a worker's failure fails the task. The JVM's workers share one
 * pool, of a thread a core at least: a task's workers wait there behind other tasks'. Written
 * for janino: no lambdas, no generics.
 */
final class ParallelPairs implements Iterator {
  static final Object END = new Object();
  static final int QUEUED = 8;  // (chunks a worker may find ahead of the task's writer)
  static ExecutorService pool;

  final LinkedBlockingQueue queue = new LinkedBlockingQueue(QUEUED);
  volatile boolean stopped;
  int running;
  ArrayList chunk = new ArrayList();
  int next;

  ParallelPairs(IndexProbe probe, ArrayList stored, int ways) {
    TaskContext task = TaskContext.get();
    if (task != null) {
      task.addTaskCompletionListener(new Stop(this));
    }
    ArrayList[] shares = new ArrayList[ways];
    for (int w = 0; w < ways; w++) {
      shares[w] = new ArrayList();
    }
    for (int i = 0; i < stored.size(); i++) {
      shares[i % ways].add(stored.get(i));
    }
    running = ways;
    for (int w = 0; w < ways; w++) {
      pool(ways).execute(new Worker(this, probe.worker(), shares[w]));
    }
  }

  /** How many workers a probe of {@code parts} partitions takes in this JVM: one a core of a
   * local master ({@code local[N]}, {@code local[*]}), at most one a partition; 1 elsewhere. */
  static int ways(int parts) {
    org.apache.spark.SparkEnv env = org.apache.spark.SparkEnv.get();
    if (env == null || !"driver".equals(env.executorId()) || parts < 2) {
      return 1;
    }
    String master = env.conf().get("spark.master", "");
    int cores = 1;
    if (master.equals("local[*]")) {
      cores = Runtime.getRuntime().availableProcessors();
    } else if (master.startsWith("local[") && master.endsWith("]")) {
      String n = master.substring(6, master.length() - 1);
      int comma = n.indexOf(',');  // (local[N, F]: N cores, F tries a task)
      try {
        cores = Integer.parseInt((comma < 0 ? n : n.substring(0, comma)).trim());
      } catch (NumberFormatException e) {
        cores = 1;
      }
    }
    return Math.max(1, Math.min(cores, parts));
  }

  /** The JVM's workers' threads, made once: a core's at least, or the first probe's ways
   * (daemons, so that they never keep the JVM up). */
  static synchronized ExecutorService pool(int ways) {
    if (pool == null) {
      pool = Executors.newFixedThreadPool(
          Math.max(ways, Runtime.getRuntime().availableProcessors()), new Daemons());
    }
    return pool;
  }

  public boolean hasNext() {
    while (next >= chunk.size()) {
      if (running == 0) {
        return false;
      }
      Object got;
      try {
        got = queue.poll(100, TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        stopped = true;
        throw new org.apache.spark.TaskKilledException("streamjoin: the probe's task was killed");
      }
      TaskContext task = TaskContext.get();
      if (task != null && task.isInterrupted()) {
        stopped = true;
        throw new org.apache.spark.TaskKilledException("streamjoin: the probe's task was killed");
      }
      if (got == END) {
        running--;
      } else if (got instanceof Throwable) {
        stopped = true;
        throw new IllegalStateException("streamjoin: a probe's worker failed", (Throwable) got);
      } else if (got != null) {
        chunk = (ArrayList) got;
        next = 0;
      }
    }
    return true;
  }

  public Object next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    Object row = chunk.get(next);
    chunk.set(next++, null);
    return row;
  }

  /** Hands {@code item} to the task's thread; false: the task has ended. */
  boolean hand(Object item) {
    try {
      while (!stopped) {
        if (queue.offer(item, 100, TimeUnit.MILLISECONDS)) {
          return true;
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return false;
  }

  /** One worker: its partitions' pairs, a chunk at a time, then END (or what failed it). */
  static final class Worker implements Runnable {
    final ParallelPairs to;
    final IndexProbe probe;
    final ArrayList stored;

    Worker(ParallelPairs to, IndexProbe probe, ArrayList stored) {
      this.to = to;
      this.probe = probe;
      this.stored = stored;
    }

    public void run() {
      try {
        probe.begin();
        ProbePairs pairs = new ProbePairs(probe, stored);
        pairs.owner = to;
        while (!to.stopped) {
          ArrayList chunk = pairs.take();
          if (chunk == null || !to.hand(chunk)) {
            break;
          }
        }
        to.hand(END);
      } catch (Throwable e) {
        to.hand(e);
      }
    }
  }

  /** Stops the workers once the task ends, however it ends. */
  static final class Stop implements TaskCompletionListener {
    final ParallelPairs pairs;

    Stop(ParallelPairs pairs) {
      this.pairs = pairs;
    }

    public void onTaskCompletion(TaskContext context) {
      pairs.stopped = true;
    }
  }

  static final class Daemons implements ThreadFactory {
    public Thread newThread(Runnable r) {
      Thread t = new Thread(r, "streamjoin-probe");
      t.setDaemon(true);
      return t;
    }
  }
}
