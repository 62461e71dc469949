/*
 * libFuzzer target for the segment reader: the input bytes are a segment
 * file.  They go into a memfd (mode 0600, as the agent creates segments), and
 * the reader opens, validates and snapshots it; a snapshot that passes is fed
 * to the model and sorted by every key, as ymtop would.  Any crash, leak,
 * out-of-bounds access or undefined behaviour found here is a reader bug: the
 * segment is hostile input by contract (include/ymtop/segment.h).
 *
 * Inputs are used as they are, so that the size checks are exercised too;
 * but to let the fuzzer reach the section checks without growing a file of
 * megabytes, an input whose header claims a total_size larger than the input
 * (at most FUZZ_MAX_SIZE) is extended with zeroes to that size, as a fresh
 * segment's untouched pages read.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model.h"
#include "shm.h"

#define FUZZ_MAX_SIZE (4u << 20)

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-seg", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fchmod(fd, 0600) != 0 || write_all(fd, data, size) != 0)
		goto out;
	/* Grow to the size the header claims, when plausible: the tail reads
	 * as zeroes, like a fresh segment's. */
	if (size >= offsetof(struct ym_header, total_size) + 8) {
		uint64_t want;
		memcpy(&want, data + offsetof(struct ym_header, total_size),
		       sizeof want);
		if (want > size && want <= FUZZ_MAX_SIZE &&
		    ftruncate(fd, (off_t)want) != 0)
			goto out;
	}

	struct shm_reader r;
	char err[256];
	if (shm_reader_open_fd(&r, fd, 0, (uid_t)-1, err, sizeof err) != 0)
		goto out;
	/* Two passes: with and without the live table. */
	for (int pass = 0; pass < 2; pass++) {
		struct shm_snapshot s;
		r.skip_live = pass;
		if (shm_snapshot_take(&r, &s, err, sizeof err) != 0)
			continue;
		struct model m;
		model_init(&m);
		if (model_update(&m, &s) == 0) {
			for (int k = 0; k < SORT_COUNT; k++)
				if (k != SORT_FUNCTION)
					model_sort(&m, (enum model_sort)k, k & 1,
						   NULL, NULL, NULL);
			model_mark(&m);
			for (uint32_t i = 0; i < m.nstacks; i++)
				(void)model_oldest_age(&m, &m.stacks[i]);
			(void)model_uptime(&m);
			(void)model_state(&m);
			/* Again, from the first: what did not change is kept. */
			struct shm_snapshot s2;
			if (shm_snapshot_take_since(&r, &s2, &m.snap, err, sizeof err) == 0 &&
			    model_update(&m, &s2) != 0) {
				shm_snapshot_giveback(&s2, &m.snap);
				shm_snapshot_free(&s2);
			}
			for (uint32_t i = 0; i < m.nstacks; i++)
				(void)model_oldest_age(&m, &m.stacks[i]);
		}
		shm_snapshot_free(&s);
		model_free(&m);
	}
	/* shm_reader_open_fd took the descriptor. */
	shm_reader_close(&r);
	return 0;
out:
	close(fd);
	return 0;
}
