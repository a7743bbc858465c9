/* fuzz_fast_paths_words.c - fuzz_fast_paths with json.c built for its
 * portable word-at-a-time scanner (JSON_SCAN_WORDS, set by fuzz.sh), the
 * one machines without SSE2 run. */
#include "fuzz_fast_paths.c"
