/* Requests and misses of one libCacheSim policy that neither its cachesim
 * CLI nor its Python package offers on its own (SR_LRU, CR_LFU: Cacheus'
 * experts) on an oracleGeneral trace at one cache size in bytes, object
 * mode, libCacheSim's defaults. Built and run by tests/libcachesim.rs
 * against the library of a libCacheSim 0.3.5 build:
 *
 *   cc -O2 -o driver libcachesim_standalone.c -I SRC/libCacheSim/include \
 *      SRC/_build/liblibCacheSim.a $(pkg-config --cflags --libs glib-2.0) \
 *      -lzstd -lm -lpthread
 *   ./driver TRACE SIZE SR_LRU      # prints "REQUESTS MISSES"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libCacheSim.h"

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: %s TRACE SIZE SR_LRU|CR_LFU\n", argv[0]); return 2; }
  reader_t *reader = open_trace(argv[1], ORACLE_GENERAL_TRACE, NULL);
  common_cache_params_t params = default_common_cache_params();
  params.cache_size = strtoull(argv[2], NULL, 10);
  cache_t *cache;
  if (strcmp(argv[3], "SR_LRU") == 0) cache = SR_LRU_init(params, NULL);
  else if (strcmp(argv[3], "CR_LFU") == 0) cache = CR_LFU_init(params, NULL);
  else { fprintf(stderr, "unknown policy %s\n", argv[3]); return 2; }
  request_t *req = new_request();
  uint64_t n = 0, misses = 0;
  while (read_one_req(reader, req) == 0) {
    n++;
    if (!cache->get(cache, req)) misses++;
  }
  printf("%llu %llu\n", (unsigned long long)n, (unsigned long long)misses);
  return 0;
}
