/*
 * Control-block writer, ymtop side: a reader's requests to the agent
 * (segment.h, Control: pause, reset, heap statistics, sample rate).  The
 * segment is hostile input: its header is read and checked before each
 * write, and the write lands inside the control block it names.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "shm.h"

static int control_write(struct shm_reader *r, size_t field, const void *v,
			 size_t n)
{
	int heap = field == __builtin_offsetof(struct ym_control, heap_request) ||
		   field == __builtin_offsetof(struct ym_control, fast_limit);
	if (r->fd < 0 || !(r->writable || (heap && r->may_ask)))
		return -EPERM;
	struct ym_header h;
	int rc = shm_read_at(r->fd, &h, sizeof h, 0);
	if (rc < 0)
		return rc;
	if (shm_header_check(&h, r->size, NULL, 0) < 0)
		return -EPROTO;
	ssize_t w = pwrite(r->fd, v, n,
			   (off_t)(h.sections[YM_SEC_CONTROL].offset + field));
	return w == (ssize_t)n ? 0 : -EIO;
}

int shm_control_pause(struct shm_reader *r, int pause)
{
	uint32_t v = pause ? 1u : 0u;
	return control_write(r, __builtin_offsetof(struct ym_control, pause),
			     &v, sizeof v);
}

int shm_control_reset(struct shm_reader *r)
{
	struct ym_header h;
	struct ym_control c;
	int rc = shm_control_read(r, &h, &c);
	if (rc < 0)
		return rc;
	uint32_t v = c.reset_seq + 1;
	return control_write(r, __builtin_offsetof(struct ym_control, reset_seq),
			     &v, sizeof v);
}

int shm_control_read(struct shm_reader *r, struct ym_header *h,
		     struct ym_control *c)
{
	memset(c, 0, sizeof *c);
	int rc = r->fd >= 0 ? shm_read_at(r->fd, h, sizeof *h, 0) : -EBADF;
	if (rc == 0 && shm_header_check(h, r->size, NULL, 0) < 0)
		rc = -EPROTO;
	if (rc == 0)
		rc = shm_read_at(r->fd, c, sizeof *c, h->sections[YM_SEC_CONTROL].offset);
	return rc;
}

int shm_control_heap(struct shm_reader *r, uint64_t *asked)
{
	*asked = 0;
	struct ym_header h;
	struct ym_control c;
	int rc = shm_control_read(r, &h, &c);
	if (rc == 0 && !ym_abi_has_heapstats(h.abi_version))
		rc = -EOPNOTSUPP;
	if (rc < 0)
		return rc;
	uint64_t v = c.heap_request + 1, zero = 0;
	rc = control_write(r, __builtin_offsetof(struct ym_control, heap_request),
			   &v, sizeof v);
	/* Then the next allocation of any thread answers (segment.h). */
	if (rc == 0)
		rc = control_write(r, __builtin_offsetof(struct ym_control, fast_limit),
				   &zero, sizeof zero);
	if (rc == 0)
		*asked = v;
	return rc;
}

int shm_control_budget(struct shm_reader *r, uint32_t ppm)
{
	if (ppm == 0 || ppm > 1000000u)
		return -EINVAL;
	struct ym_header h;
	int rc = r->fd >= 0 ? shm_read_at(r->fd, &h, sizeof h, 0) : -EBADF;
	if (rc < 0)
		return rc;
	if (!ym_abi_has_budget(h.abi_version))
		return -EOPNOTSUPP;
	if (h.sample_rate <= 1)   /* exact mode records every call */
		return -EINVAL;
	uint64_t v = ppm;
	return control_write(r, __builtin_offsetof(struct ym_control, max_overhead),
			     &v, sizeof v);
}

int shm_control_rate(struct shm_reader *r, uint64_t rate)
{
	if (rate < SHM_RATE_MIN || rate > SHM_RATE_MAX)
		return -EINVAL;
	struct ym_header h;
	int rc = r->fd >= 0 ? shm_read_at(r->fd, &h, sizeof h, 0) : -EBADF;
	if (rc < 0)
		return rc;
	if (h.sample_rate <= 1)   /* exact mode is fixed at start */
		return -EINVAL;
	return control_write(r, __builtin_offsetof(struct ym_control, sample_rate),
			     &rate, sizeof rate);
}
