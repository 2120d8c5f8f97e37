/*
 * libFuzzer harness for the C region opener (clang only):
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined test/fuzz_open.c lockword.c -o fuzz_open
 *   ./fuzz_open -runs=20000 CORPUS_DIR
 * Each input is written to a file and opened: any code is fine, a crash
 * or a sanitizer report is a bug. The Go fuzzer's seeds seed it (make
 * fuzz writes them out of ../shm/testdata/fuzz/FuzzOpenRegion).
 */
#define _GNU_SOURCE
#include "../lockword.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	static char path[64];
	if (!path[0])
		snprintf(path, sizeof path, "/tmp/lockword-fuzz-%d", (int)getpid());
	unlink(path);
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	lw_region *r;
	if (lw_region_open_init(path, -1, &r) == 0) {
		lw_mutex *m;
		if (lw_region_mutex(r, "m", &m) == 0)
			(void)lw_mutex_word(m);
		lw_region_close(r);
	}
	return 0;
}
