import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Replays a libCacheSim oracleGeneral trace through a real Caffeine cache and
 * prints one line per cache size: size, requests, hits, and the share of the
 * cache Caffeine's window held at the end (its climber adapts it).
 *
 * <p>Usage: {@code java Replay TRACE unit|bytes SIZE[,SIZE...]}. {@code unit}
 * bounds the entry count ({@code maximumSize}), {@code bytes} the sum of the
 * request sizes ({@code maximumWeight}). A request is a hit when
 * {@code getIfPresent} finds the key, else the key is put. Maintenance runs
 * on the calling thread after every request, so eviction and the policy's
 * reordering happen in trace order, as in a simulator.
 */
public final class Replay {
  public static void main(String[] args) throws Exception {
    if (args.length != 3 || !(args[1].equals("unit") || args[1].equals("bytes"))) {
      System.err.println("usage: java Replay TRACE unit|bytes SIZE[,SIZE...]");
      System.exit(2);
    }
    Trace trace = Trace.read(Path.of(args[0]));
    boolean bytes = args[1].equals("bytes");
    for (String size : args[2].split(",")) {
      long capacity = Long.parseLong(size.trim());
      Caffeine<Object, Object> builder = Caffeine.newBuilder().executor(Runnable::run);
      Cache<Long, Integer> cache = bytes
          ? builder.maximumWeight(capacity).weigher((Long k, Integer v) -> v).build()
          : builder.maximumSize(capacity).<Long, Integer>build();
      long hits = 0;
      for (int i = 0; i < trace.ids.length; i++) {
        Long key = trace.ids[i];
        if (cache.getIfPresent(key) != null) {
          hits++;
        } else {
          cache.put(key, trace.sizes[i]);
        }
        cache.cleanUp();
      }
      System.out.printf("%d %d %d %.4f%n", capacity, trace.ids.length, hits, windowShare(cache, capacity));
    }
  }

  /** The window's maximum as a share of the capacity, read from the cache's internals. */
  static double windowShare(Cache<?, ?> cache, long capacity) throws ReflectiveOperationException {
    var field = cache.getClass().getDeclaredField("cache");
    field.setAccessible(true);
    Object bounded = field.get(cache);
    for (Class<?> c = bounded.getClass(); c != null; c = c.getSuperclass()) {
      try {
        Method m = c.getDeclaredMethod("windowMaximum");
        m.setAccessible(true);
        return (long) m.invoke(bounded) / (double) capacity;
      } catch (NoSuchMethodException e) {
        // declared further up
      }
    }
    return Double.NaN;
  }

  /** The ids and sizes of an oracleGeneral trace: 24-byte little-endian records
   *  (u32 time, u64 id, u32 size, i64 next access). */
  record Trace(Long[] ids, Integer[] sizes) {
    static Trace read(Path path) throws IOException {
      try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
        ByteBuffer buf = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size()).order(ByteOrder.LITTLE_ENDIAN);
        int n = (int) (ch.size() / 24);
        Long[] ids = new Long[n];
        Integer[] sizes = new Integer[n];
        for (int i = 0; i < n; i++) {
          ids[i] = buf.getLong(i * 24 + 4);
          sizes[i] = buf.getInt(i * 24 + 12);
        }
        return new Trace(ids, sizes);
      }
    }
  }
}
