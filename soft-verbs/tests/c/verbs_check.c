/*
 * The soft device's verbs as a C program sees them: rdma-core's own
 * <infiniband/verbs.h> (rdma-core 44), its inline functions and structure
 * layouts, against soft-verbs' libibverbs.so.1.
 *
 *   verbs_check CHECK
 *
 * runs one check and prints "ok CHECK", or "FAIL CHECK ..." (and exits 1)
 * at the first outcome that is not exactly the expected one. Transfer
 * checks connect two RC QPs of one context to each other over the first
 * device (hipobj_soft0 on 127.0.0.1). soft-verbs/tests/verbs_c.rs builds
 * and runs it, one check per test.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static const char *check_name = "?";

static void fail(int line, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

static void fail(int line, const char *fmt, ...)
{
	va_list ap;

	printf("FAIL %s (verbs_check.c:%d): ", check_name, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond))                                                   \
			fail(__LINE__, __VA_ARGS__);                           \
	} while (0)

/* An exact integer outcome. */
#define EQ(got, want)                                                          \
	do {                                                                   \
		long long g_ = (long long)(got), w_ = (long long)(want);      \
		if (g_ != w_)                                                  \
			fail(__LINE__, "%s is %lld, expected %s (%lld)", #got, \
			     g_, #want, w_);                                   \
	} while (0)

/* A verb returning 0 or an errno value. */
#define OK(call)                                                               \
	do {                                                                   \
		int rc_ = (call);                                              \
		if (rc_ != 0)                                                  \
			fail(__LINE__, "%s returned %d (%s)", #call, rc_,      \
			     strerror(rc_ > 0 ? rc_ : errno));                 \
	} while (0)

/* A verb returning an object, or NULL with errno. */
#define NOTNULL(p)                                                             \
	do {                                                                   \
		if (!(p))                                                      \
			fail(__LINE__, "%s is NULL (errno %d: %s)", #p, errno, \
			     strerror(errno));                                 \
	} while (0)

/* A verb that must return NULL with errno `e`. */
#define NULL_ERRNO(call, e)                                                    \
	do {                                                                   \
		errno = 0;                                                     \
		void *p_ = (void *)(call);                                     \
		int err_ = errno;                                              \
		if (p_ != NULL)                                                \
			fail(__LINE__, "%s succeeded, expected NULL with %s",  \
			     #call, #e);                                       \
		if (err_ != (e))                                               \
			fail(__LINE__, "%s: errno %d (%s), expected %s (%d)",  \
			     #call, err_, strerror(err_), #e, (e));            \
	} while (0)

#define WAIT_MS 20000

/* ---- the device and its objects ---------------------------------------- */

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
};

static struct env open_env(void)
{
	struct env e;
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	NOTNULL(list);
	CHECK(n >= 1 && list[0], "no device listed (n = %d)", n);
	EQ(strcmp(ibv_get_device_name(list[0]), "hipobj_soft0"), 0);
	e.ctx = ibv_open_device(list[0]);
	NOTNULL(e.ctx);
	ibv_free_device_list(list);
	e.pd = ibv_alloc_pd(e.ctx);
	NOTNULL(e.pd);
	CHECK(ibv_query_gid(e.ctx, 1, 0, &e.gid) == 0, "ibv_query_gid: %s",
	      strerror(errno));
	return e;
}

static void close_env(struct env *e)
{
	OK(ibv_dealloc_pd(e->pd));
	OK(ibv_close_device(e->ctx));
}

/* Memory registered for everything (local write, remote write and read). */
struct buf {
	uint8_t *p;
	size_t len;
	struct ibv_mr *mr;
};

#define ACCESS_ALL                                                             \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ)

static struct buf make_buf(struct env *e, size_t len, uint8_t fill)
{
	struct buf b;

	CHECK(posix_memalign((void **)&b.p, 4096, len) == 0, "no memory");
	memset(b.p, fill, len);
	b.len = len;
	b.mr = ibv_reg_mr(e->pd, b.p, len, ACCESS_ALL);
	NOTNULL(b.mr);
	EQ(b.mr->addr == b.p, 1);
	EQ(b.mr->length, len);
	return b;
}

static void free_buf(struct buf *b)
{
	OK(ibv_dereg_mr(b->mr));
	free(b->p);
}

static uint64_t addr_of(const struct buf *b, size_t off)
{
	return (uint64_t)(uintptr_t)(b->p + off);
}

/* Fills p[0..len) with a pattern that depends on `seed` and the offset. */
static void pattern(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

/* Whether p[0..len) holds pattern(seed); fails naming the first
 * difference. */
#define EXPECT_PATTERN(p, len, seed) expect_pattern(__LINE__, p, len, seed)
static void expect_pattern(int line, const uint8_t *p, size_t len,
			   unsigned seed)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t want = (uint8_t)(seed * 131u + i * 7u + (i >> 8));

		if (p[i] != want)
			fail(line, "byte %zu of %zu is 0x%02x, expected 0x%02x",
			     i, len, p[i], want);
	}
}

#define EXPECT_FILL(p, len, v) expect_fill(__LINE__, p, len, v)
static void expect_fill(int line, const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			fail(line, "byte %zu of %zu is 0x%02x, expected 0x%02x",
			     i, len, p[i], v);
}

/* One RC QP with its own send and receive CQs. */
struct side {
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
};

static struct ibv_qp *create_rc(struct env *e, struct ibv_cq *scq,
				struct ibv_cq *rcq, int sig_all,
				uint32_t max_inline)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = sig_all;
	a.cap.max_send_wr = 64;
	a.cap.max_recv_wr = 64;
	a.cap.max_send_sge = 4;
	a.cap.max_recv_sge = 4;
	a.cap.max_inline_data = max_inline;
	struct ibv_qp *qp = ibv_create_qp(e->pd, &a);

	NOTNULL(qp);
	CHECK(a.cap.max_inline_data >= max_inline,
	      "max_inline_data %u < %u asked", a.cap.max_inline_data,
	      max_inline);
	EQ(qp->qp_type, IBV_QPT_RC);
	EQ(qp->state, IBV_QPS_RESET);
	return qp;
}

static struct side make_side(struct env *e, int sig_all, uint32_t max_inline)
{
	struct side s;

	s.scq = ibv_create_cq(e->ctx, 128, NULL, NULL, 0);
	NOTNULL(s.scq);
	s.rcq = ibv_create_cq(e->ctx, 128, NULL, NULL, 0);
	NOTNULL(s.rcq);
	s.qp = create_rc(e, s.scq, s.rcq, sig_all, max_inline);
	return s;
}

static void free_side(struct side *s)
{
	OK(ibv_destroy_qp(s->qp));
	OK(ibv_destroy_cq(s->scq));
	OK(ibv_destroy_cq(s->rcq));
}

/* ---- connecting ------------------------------------------------------- */

/* The requester's timer settings: for a check whose outcome is success, a
 * timer that does not fire under load (it only matters if something is
 * wrong); for one that waits for the timer, the short one. */
struct timing {
	uint8_t timeout, retry_cnt, rnr_retry;
};
static const struct timing ROBUST = { 14, 7, 7 };
static const struct timing SHORT = { 10, 1, 7 };

static uint32_t psn_of(const struct ibv_qp *qp)
{
	return (qp->qp_num * 2654435761u) & 0xffffff;
}

static int modify_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
}

static void rtr_attr(struct env *e, const struct ibv_qp *peer,
		     struct ibv_qp_attr *a, int *mask)
{
	struct ibv_port_attr port;

	OK(ibv_query_port(e->ctx, 1, &port));
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = port.active_mtu;
	a->dest_qp_num = peer->qp_num;
	a->rq_psn = psn_of(peer);
	a->max_dest_rd_atomic = 16;
	a->min_rnr_timer = 12;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.dgid = e->gid;
	a->ah_attr.grh.sgid_index = 0;
	a->ah_attr.grh.hop_limit = 64;
	a->ah_attr.port_num = 1;
	*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		IBV_QP_MIN_RNR_TIMER;
}

static int modify_rtr(struct env *e, struct ibv_qp *qp,
		      const struct ibv_qp *peer)
{
	struct ibv_qp_attr a;
	int mask;

	rtr_attr(e, peer, &a, &mask);
	return ibv_modify_qp(qp, &a, mask);
}

static int modify_rts(struct ibv_qp *qp, struct timing t)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn_of(qp);
	a.timeout = t.timeout;
	a.retry_cnt = t.retry_cnt;
	a.rnr_retry = t.rnr_retry;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

/* `qp` all the way to RTS, towards `peer`. */
static void bring_up(struct env *e, struct ibv_qp *qp,
		     const struct ibv_qp *peer, struct timing t)
{
	OK(modify_init(qp));
	OK(modify_rtr(e, qp, peer));
	OK(modify_rts(qp, t));
	EQ(qp->state, IBV_QPS_RTS);
}

static void connect_pair(struct env *e, struct side *a, struct side *b,
			 struct timing ta)
{
	bring_up(e, a->qp, b->qp, ta);
	bring_up(e, b->qp, a->qp, ROBUST);
}

static enum ibv_qp_state query_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	memset(&a, 0xee, sizeof(a));
	OK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia));
	return a.qp_state;
}

/* ---- posting and completions ----------------------------------------- */

static void post_recv(struct ibv_qp *qp, uint64_t wr_id, const struct buf *b,
		      size_t off, uint32_t len)
{
	struct ibv_sge sge = { addr_of(b, off), len, b->mr->lkey };
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	OK(ibv_post_recv(qp, &wr, &bad));
}

/* Posts one send work request; returns ibv_post_send's value. */
static int post_one(struct ibv_qp *qp, uint64_t wr_id,
		    enum ibv_wr_opcode op, unsigned flags, struct ibv_sge *sge,
		    int num_sge, uint64_t raddr, uint32_t rkey, uint32_t imm_be)
{
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.sg_list = sge;
	wr.num_sge = num_sge;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	wr.imm_data = imm_be;
	rc = ibv_post_send(qp, &wr, &bad);
	if (rc != 0)
		CHECK(bad == &wr, "bad_wr does not name the refused request");
	return rc;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Polls one completion within `ms`: 1, or 0 if none came. */
static int poll_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	double end = now_ms() + ms;

	for (;;) {
		memset(wc, 0xcd, sizeof(*wc));
		int n = ibv_poll_cq(cq, 1, wc);

		CHECK(n >= 0, "ibv_poll_cq returned %d", n);
		if (n == 1)
			return 1;
		if (now_ms() > end)
			return 0;
		usleep(200);
	}
}

/* The next completion, which must have `status` and `wr_id`. */
#define EXPECT_WC(cq, wc, st, id) expect_wc(__LINE__, cq, wc, st, id)
static void expect_wc(int line, struct ibv_cq *cq, struct ibv_wc *wc,
		      enum ibv_wc_status status, uint64_t wr_id)
{
	if (!poll_wc(cq, wc, WAIT_MS))
		fail(line, "no completion within %d ms (expected wr_id %" PRIu64
			   ", %s)",
		     WAIT_MS, wr_id, ibv_wc_status_str(status));
	if (wc->status != status || wc->wr_id != wr_id)
		fail(line,
		     "completion wr_id %" PRIu64 " status %s (%d, vendor_err "
		     "0x%x), expected wr_id %" PRIu64 " status %s",
		     wc->wr_id, ibv_wc_status_str(wc->status), wc->status,
		     wc->vendor_err, wr_id, ibv_wc_status_str(status));
}

/* No completion for `ms`. */
#define EXPECT_NONE(cq, ms) expect_none(__LINE__, cq, ms)
static void expect_none(int line, struct ibv_cq *cq, int ms)
{
	struct ibv_wc wc;

	if (poll_wc(cq, &wc, ms))
		fail(line, "unexpected completion wr_id %" PRIu64 " status %s",
		     wc.wr_id, ibv_wc_status_str(wc.status));
}

/* A WRITE of `len` bytes from `src` at `soff` to `dst` at `doff`,
 * signalled; returns ibv_post_send's value. */
static int post_write(struct side *s, uint64_t wr_id, struct buf *src,
		      size_t soff, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { addr_of(src, soff), len, src->mr->lkey };

	return post_one(s->qp, wr_id, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
			&sge, 1, raddr, rkey, 0);
}

/* ---- the checks ------------------------------------------------------- */

static void check_devices(void)
{
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);
	int found = 0;

	NOTNULL(list);
	CHECK(n >= 1, "%d devices", n);
	for (int i = 0; i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), "hipobj_soft0") == 0)
			found = 1;
	EQ(found, 1);
	EQ(list[n] == NULL, 1);
	EQ(strcmp(list[0]->name, "hipobj_soft0"), 0);
	struct ibv_context *ctx = ibv_open_device(list[0]);

	NOTNULL(ctx);
	EQ(ctx->device == list[0], 1);

	struct ibv_device_attr_ex dx;

	memset(&dx, 0xab, sizeof(dx));
	OK(ibv_query_device_ex(ctx, NULL, &dx));
	EQ(dx.orig_attr.max_qp_wr, 16384);
	EQ(dx.orig_attr.atomic_cap, IBV_ATOMIC_NONE);
	EQ(dx.orig_attr.phys_port_cnt, 1);
	EQ(dx.orig_attr.max_qp_rd_atom, 16);
	EQ(dx.comp_mask, 0);
	EQ(dx.odp_caps.general_caps, 0);
	EQ(strcmp(dx.orig_attr.fw_ver, "hipobj-soft 1.0"), 0);
	/* The compatibility entry agrees. */
	struct ibv_device_attr d;

	OK(ibv_query_device(ctx, &d));
	EQ(d.max_qp_wr, 16384);
	EQ(d.node_guid, dx.orig_attr.node_guid);

	struct ibv_port_attr pa;

	memset(&pa, 0xab, sizeof(pa));
	OK(ibv_query_port(ctx, 1, &pa));
	EQ(pa.state, IBV_PORT_ACTIVE);
	EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	EQ(pa.active_mtu, IBV_MTU_4096);
	EQ(pa.gid_tbl_len, 1);
	/* There is one port. */
	CHECK(ibv_query_port(ctx, 2, &pa) != 0, "port 2 answered");

	static const uint8_t want_gid[16] = { 0, 0, 0,    0,    0,   0, 0, 0,
					      0, 0, 0xff, 0xff, 127, 0, 0, 1 };
	struct ibv_gid_entry ge;

	memset(&ge, 0xab, sizeof(ge));
	OK(ibv_query_gid_ex(ctx, 1, 0, &ge, 0));
	EQ(ge.gid_type, IBV_GID_TYPE_ROCE_V2);
	EQ(ge.gid_index, 0);
	EQ(ge.port_num, 1);
	EQ(memcmp(ge.gid.raw, want_gid, 16), 0);
	union ibv_gid g;

	OK(ibv_query_gid(ctx, 1, 0, &g));
	EQ(memcmp(g.raw, want_gid, 16), 0);
	CHECK(ibv_query_gid_ex(ctx, 1, 1, &ge, 0) != 0, "GID index 1 answered");

	uint16_t pkey = 0;

	OK(ibv_query_pkey(ctx, 1, 0, &pkey));
	EQ(pkey, 0xffff);

	OK(ibv_close_device(ctx));
	ibv_free_device_list(list);
}

static void check_unsupported(void)
{
	struct env e = open_env();
	struct buf b = make_buf(&e, 8192, 0);

	NULL_ERRNO(ibv_reg_dmabuf_mr(e.pd, 0, 4096, 0, -1,
				     IBV_ACCESS_LOCAL_WRITE),
		   EOPNOTSUPP);

	struct ibv_srq_init_attr sa;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	NULL_ERRNO(ibv_create_srq(e.pd, &sa), EOPNOTSUPP);

	struct ibv_cq *cq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);

	NOTNULL(cq);
	struct ibv_qp_init_attr ua;

	memset(&ua, 0, sizeof(ua));
	ua.send_cq = cq;
	ua.recv_cq = cq;
	ua.qp_type = IBV_QPT_UD;
	ua.cap.max_send_wr = 4;
	ua.cap.max_recv_wr = 4;
	ua.cap.max_send_sge = 1;
	ua.cap.max_recv_sge = 1;
	NULL_ERRNO(ibv_create_qp(e.pd, &ua), EOPNOTSUPP);

	struct ibv_cq_init_attr_ex ca;

	memset(&ca, 0, sizeof(ca));
	ca.cqe = 16;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	NULL_ERRNO(ibv_create_cq_ex(e.ctx, &ca), EOPNOTSUPP);

	NULL_ERRNO(ibv_reg_mr_iova2(e.pd, b.p, 4096, addr_of(&b, 0) + 4096,
				    IBV_ACCESS_LOCAL_WRITE),
		   EOPNOTSUPP);
	/* iova == addr is an ordinary registration. */
	struct ibv_mr *mr = ibv_reg_mr_iova2(e.pd, b.p, 4096, addr_of(&b, 0),
					     IBV_ACCESS_LOCAL_WRITE);

	NOTNULL(mr);
	OK(ibv_dereg_mr(mr));

	/* An atomic in a list after a valid WRITE: the WRITE is posted (and
	 * completes), the atomic is refused and named by bad_wr. */
	struct side a = make_side(&e, 0, 0), p = make_side(&e, 0, 0);
	struct buf dst = make_buf(&e, 4096, 0x11);

	connect_pair(&e, &a, &p, ROBUST);
	pattern(b.p, 64, 3);
	struct ibv_sge s1 = { addr_of(&b, 0), 64, b.mr->lkey };
	struct ibv_sge s2 = { addr_of(&b, 64), 8, b.mr->lkey };
	struct ibv_send_wr w[2], *bad = NULL;

	memset(w, 0, sizeof(w));
	w[0].wr_id = 1;
	w[0].opcode = IBV_WR_RDMA_WRITE;
	w[0].send_flags = IBV_SEND_SIGNALED;
	w[0].sg_list = &s1;
	w[0].num_sge = 1;
	w[0].wr.rdma.remote_addr = addr_of(&dst, 0);
	w[0].wr.rdma.rkey = dst.mr->rkey;
	w[0].next = &w[1];
	w[1].wr_id = 2;
	w[1].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	w[1].send_flags = IBV_SEND_SIGNALED;
	w[1].sg_list = &s2;
	w[1].num_sge = 1;
	w[1].wr.atomic.remote_addr = addr_of(&dst, 1024);
	w[1].wr.atomic.compare_add = 1;
	w[1].wr.atomic.rkey = dst.mr->rkey;
	EQ(ibv_post_send(a.qp, w, &bad), EINVAL);
	EQ(bad == &w[1], 1);
	struct ibv_wc wc;

	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 1);
	EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	EXPECT_NONE(a.scq, 200);
	EXPECT_PATTERN(dst.p, 64, 3);
	EXPECT_FILL(dst.p + 64, 4096 - 64, 0x11);
	EQ(query_state(a.qp), IBV_QPS_RTS);
	/* The same alone, and the compare-and-swap. */
	w[1].next = NULL;
	bad = NULL;
	EQ(ibv_post_send(a.qp, &w[1], &bad), EINVAL);
	EQ(bad == &w[1], 1);
	w[1].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	bad = NULL;
	EQ(ibv_post_send(a.qp, &w[1], &bad), EINVAL);
	EQ(bad == &w[1], 1);
	EXPECT_NONE(a.scq, 100);

	free_side(&a);
	free_side(&p);
	free_buf(&dst);
	OK(ibv_destroy_cq(cq));
	free_buf(&b);
	close_env(&e);
}

static void check_state_machine(void)
{
	struct env e = open_env();
	struct side a = make_side(&e, 1, 0), b = make_side(&e, 1, 0);
	struct buf src = make_buf(&e, 4096, 0), dst = make_buf(&e, 4096, 0);
	struct ibv_qp_attr attr;
	int mask;

	EQ(query_state(a.qp), IBV_QPS_RESET);

	/* No receives in RESET. */
	{
		struct ibv_sge rs = { addr_of(&dst, 0), 16, dst.mr->lkey };
		struct ibv_recv_wr rw, *rbad = NULL;

		memset(&rw, 0, sizeof(rw));
		rw.wr_id = 69;
		rw.sg_list = &rs;
		rw.num_sge = 1;
		EQ(ibv_post_recv(a.qp, &rw, &rbad), EINVAL);
		EQ(rbad == &rw, 1);
	}

	/* RESET -> RTR directly. */
	rtr_attr(&e, b.qp, &attr, &mask);
	EQ(ibv_modify_qp(a.qp, &attr, mask), EINVAL);
	EQ(query_state(a.qp), IBV_QPS_RESET);

	/* RESET -> INIT without the access flags. */
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	EQ(ibv_modify_qp(a.qp, &attr,
			 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT),
	   EINVAL);
	EQ(query_state(a.qp), IBV_QPS_RESET);

	OK(modify_init(a.qp));
	EQ(query_state(a.qp), IBV_QPS_INIT);
	EQ(a.qp->state, IBV_QPS_INIT);

	/* A send in INIT (receives are allowed). */
	struct ibv_sge sge = { addr_of(&src, 0), 16, src.mr->lkey };

	EQ(post_one(a.qp, 7, IBV_WR_SEND, IBV_SEND_SIGNALED, &sge, 1, 0, 0, 0),
	   EINVAL);
	post_recv(a.qp, 70, &dst, 0, 16);

	OK(modify_rtr(&e, a.qp, b.qp));
	EQ(query_state(a.qp), IBV_QPS_RTR);
	/* Still no sends in RTR. */
	EQ(post_one(a.qp, 8, IBV_WR_SEND, IBV_SEND_SIGNALED, &sge, 1, 0, 0, 0),
	   EINVAL);
	OK(modify_rts(a.qp, ROBUST));
	EQ(query_state(a.qp), IBV_QPS_RTS);

	/* What ibv_query_qp reports. */
	struct ibv_qp_init_attr ia;

	memset(&attr, 0, sizeof(attr));
	OK(ibv_query_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_DEST_QPN, &ia));
	EQ(attr.qp_state, IBV_QPS_RTS);
	EQ(attr.dest_qp_num, b.qp->qp_num);
	EQ(attr.sq_psn, psn_of(a.qp));
	EQ(attr.rq_psn, psn_of(b.qp));
	EQ(attr.path_mtu, IBV_MTU_4096);
	EQ(attr.timeout, ROBUST.timeout);
	EQ(attr.ah_attr.is_global, 1);
	EQ(memcmp(attr.ah_attr.grh.dgid.raw, e.gid.raw, 16), 0);
	EQ(ia.qp_type, IBV_QPT_RC);
	EQ(ia.send_cq == a.scq, 1);
	EQ(ia.recv_cq == a.rcq, 1);
	EQ(ia.sq_sig_all, 1);

	/* RTS -> RTR. */
	rtr_attr(&e, b.qp, &attr, &mask);
	EQ(ibv_modify_qp(a.qp, &attr, mask), EINVAL);
	EQ(query_state(a.qp), IBV_QPS_RTS);

	/* To ERR: the receive posted in INIT is flushed. */
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_ERR;
	OK(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE));
	EQ(query_state(a.qp), IBV_QPS_ERR);
	EQ(a.qp->state, IBV_QPS_ERR);
	struct ibv_wc wc;

	EXPECT_WC(a.rcq, &wc, IBV_WC_WR_FLUSH_ERR, 70);

	/* ERR -> RESET -> INIT, then up again towards b, and it works. */
	attr.qp_state = IBV_QPS_RESET;
	OK(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE));
	EQ(query_state(a.qp), IBV_QPS_RESET);
	OK(modify_init(a.qp));
	EQ(query_state(a.qp), IBV_QPS_INIT);
	OK(modify_rtr(&e, a.qp, b.qp));
	OK(modify_rts(a.qp, ROBUST));
	bring_up(&e, b.qp, a.qp, ROBUST);
	pattern(src.p, 1000, 9);
	OK(post_write(&a, 9, &src, 0, 1000, addr_of(&dst, 100),
		      dst.mr->rkey));
	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 9);
	EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	EXPECT_PATTERN(dst.p + 100, 1000, 9);
	EXPECT_FILL(dst.p, 100, 0);
	EXPECT_FILL(dst.p + 1100, 4096 - 1100, 0);

	free_side(&a);
	free_side(&b);
	free_buf(&src);
	free_buf(&dst);
	close_env(&e);
}

static void check_write_imm_and_send_imm(void)
{
	struct env e = open_env();
	struct side a = make_side(&e, 0, 0), b = make_side(&e, 0, 0);
	struct buf src = make_buf(&e, 16384, 0);
	struct buf win = make_buf(&e, 16384, 0x22);  /* b's WRITE target */
	struct buf rbuf = make_buf(&e, 8192, 0x33); /* b's receives */
	struct ibv_wc wc;

	connect_pair(&e, &a, &b, ROBUST);
	post_recv(b.qp, 1001, &rbuf, 0, 4096);
	post_recv(b.qp, 1002, &rbuf, 4096, 4096);

	/* WRITE_WITH_IMM: the bytes land in the window, the immediate
	 * completes b's first receive (whose buffer is untouched). */
	const uint32_t imm1 = htobe32(0x12345678);

	pattern(src.p, 3000, 41);
	struct ibv_sge sge = { addr_of(&src, 0), 3000, src.mr->lkey };

	OK(post_one(a.qp, 11, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED,
		    &sge, 1, addr_of(&win, 500), win.mr->rkey, imm1));
	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 11);
	EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	EQ(wc.qp_num, a.qp->qp_num);
	EXPECT_WC(b.rcq, &wc, IBV_WC_SUCCESS, 1001);
	EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	EQ(wc.byte_len, 3000);
	EQ(wc.imm_data, imm1);
	EQ(wc.wc_flags & IBV_WC_WITH_IMM, IBV_WC_WITH_IMM);
	EQ(wc.qp_num, b.qp->qp_num);
	EQ(wc.src_qp, a.qp->qp_num);
	EXPECT_PATTERN(win.p + 500, 3000, 41);
	EXPECT_FILL(win.p, 500, 0x22);
	EXPECT_FILL(win.p + 3500, 16384 - 3500, 0x22);
	EXPECT_FILL(rbuf.p, 4096, 0x33);

	/* SEND_WITH_IMM: into b's second receive, with its immediate. */
	const uint32_t imm2 = htobe32(0xdeadbeef);

	pattern(src.p + 8192, 2500, 42);
	sge.addr = addr_of(&src, 8192);
	sge.length = 2500;
	OK(post_one(a.qp, 12, IBV_WR_SEND_WITH_IMM, IBV_SEND_SIGNALED, &sge, 1,
		    0, 0, imm2));
	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 12);
	EQ(wc.opcode, IBV_WC_SEND);
	EXPECT_WC(b.rcq, &wc, IBV_WC_SUCCESS, 1002);
	EQ(wc.opcode, IBV_WC_RECV);
	EQ(wc.byte_len, 2500);
	EQ(wc.imm_data, imm2);
	EQ(wc.wc_flags & IBV_WC_WITH_IMM, IBV_WC_WITH_IMM);
	EQ(wc.src_qp, a.qp->qp_num);
	EXPECT_PATTERN(rbuf.p + 4096, 2500, 42);
	EXPECT_FILL(rbuf.p + 4096 + 2500, 4096 - 2500, 0x33);

	/* A plain SEND has no immediate. */
	post_recv(b.qp, 1003, &rbuf, 0, 4096);
	sge.length = 10;
	OK(post_one(a.qp, 13, IBV_WR_SEND, IBV_SEND_SIGNALED, &sge, 1, 0, 0,
		    0));
	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 13);
	EXPECT_WC(b.rcq, &wc, IBV_WC_SUCCESS, 1003);
	EQ(wc.opcode, IBV_WC_RECV);
	EQ(wc.byte_len, 10);
	EQ(wc.wc_flags & IBV_WC_WITH_IMM, 0);

	EXPECT_NONE(a.scq, 100);
	EXPECT_NONE(b.rcq, 100);
	EXPECT_NONE(b.scq, 0);
	EXPECT_NONE(a.rcq, 0);
	free_side(&a);
	free_side(&b);
	free_buf(&src);
	free_buf(&win);
	free_buf(&rbuf);
	close_env(&e);
}

static void check_inline_and_sges(void)
{
	struct env e = open_env();
	struct side a = make_side(&e, 0, 256), b = make_side(&e, 0, 0);
	struct buf rbuf = make_buf(&e, 8192, 0x44);
	struct buf r1 = make_buf(&e, 4096, 0), r2 = make_buf(&e, 4096, 0);
	struct ibv_wc wc;

	connect_pair(&e, &a, &b, ROBUST);
	post_recv(b.qp, 2001, &rbuf, 0, 4096);
	post_recv(b.qp, 2002, &rbuf, 4096, 4096);

	/* Inline from unregistered memory, overwritten at once. */
	uint8_t *plain = malloc(200);

	NOTNULL(plain);
	pattern(plain, 200, 51);
	struct ibv_sge sge = { (uint64_t)(uintptr_t)plain, 200, 0 };

	OK(post_one(a.qp, 21, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		    &sge, 1, 0, 0, 0));
	memset(plain, 0xee, 200);
	free(plain);
	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 21);
	EQ(wc.opcode, IBV_WC_SEND);
	EXPECT_WC(b.rcq, &wc, IBV_WC_SUCCESS, 2001);
	EQ(wc.opcode, IBV_WC_RECV);
	EQ(wc.byte_len, 200);
	EXPECT_PATTERN(rbuf.p, 200, 51);
	EXPECT_FILL(rbuf.p + 200, 4096 - 200, 0x44);

	/* Three SGEs from two regions (one of them twice, at other offsets),
	 * concatenated into one receive. */
	pattern(r1.p + 100, 300, 52);
	pattern(r2.p + 1000, 2000, 53);
	pattern(r1.p + 3000, 7, 54);
	struct ibv_sge three[3] = {
		{ addr_of(&r1, 100), 300, r1.mr->lkey },
		{ addr_of(&r2, 1000), 2000, r2.mr->lkey },
		{ addr_of(&r1, 3000), 7, r1.mr->lkey },
	};

	OK(post_one(a.qp, 22, IBV_WR_SEND, IBV_SEND_SIGNALED, three, 3, 0, 0,
		    0));
	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 22);
	EXPECT_WC(b.rcq, &wc, IBV_WC_SUCCESS, 2002);
	EQ(wc.byte_len, 2307);
	EXPECT_PATTERN(rbuf.p + 4096, 300, 52);
	EXPECT_PATTERN(rbuf.p + 4096 + 300, 2000, 53);
	EXPECT_PATTERN(rbuf.p + 4096 + 2300, 7, 54);
	EXPECT_FILL(rbuf.p + 4096 + 2307, 4096 - 2307, 0x44);

	/* More SGEs than the QP's max_send_sge (4): refused, nothing sent. */
	struct ibv_sge five[5];

	for (int i = 0; i < 5; i++) {
		five[i].addr = addr_of(&r1, i * 8);
		five[i].length = 8;
		five[i].lkey = r1.mr->lkey;
	}
	EQ(post_one(a.qp, 25, IBV_WR_SEND, IBV_SEND_SIGNALED, five, 5, 0, 0, 0),
	   EINVAL);

	/* Inline data longer than the QP's max_inline_data is refused. */
	uint8_t big[300];

	memset(big, 1, sizeof(big));
	sge.addr = (uint64_t)(uintptr_t)big;
	sge.length = sizeof(big);
	EQ(post_one(a.qp, 23, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		    &sge, 1, 0, 0, 0),
	   EINVAL);
	EXPECT_NONE(a.scq, 100);
	EXPECT_NONE(b.rcq, 0);

	/* Zero bytes inline fit any QP, one without inline room (b) too. */
	post_recv(a.qp, 2003, &rbuf, 0, 4096);
	OK(post_one(b.qp, 24, IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		    NULL, 0, 0, 0, 0));
	EXPECT_WC(b.scq, &wc, IBV_WC_SUCCESS, 24);
	EXPECT_WC(a.rcq, &wc, IBV_WC_SUCCESS, 2003);
	EQ(wc.opcode, IBV_WC_RECV);
	EQ(wc.byte_len, 0);
	EXPECT_PATTERN(rbuf.p, 200, 51);

	/* A QP asking for more inline data than the library has. */
	struct ibv_qp_init_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = a.scq;
	qa.recv_cq = a.rcq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 8;
	qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = 4096;
	NULL_ERRNO(ibv_create_qp(e.pd, &qa), EINVAL);

	free_side(&a);
	free_side(&b);
	free_buf(&rbuf);
	free_buf(&r1);
	free_buf(&r2);
	close_env(&e);
}

static void check_unsignalled(void)
{
	struct env e = open_env();
	struct side a = make_side(&e, 0, 0), b = make_side(&e, 0, 0);
	struct buf src = make_buf(&e, 6 * 1024, 0);
	struct buf dst = make_buf(&e, 8 * 1024, 0x55);
	struct ibv_wc wc;

	connect_pair(&e, &a, &b, ROBUST);
	for (int i = 0; i < 6; i++) {
		pattern(src.p + i * 1024, 1000, 60 + i);
		struct ibv_sge sge = { addr_of(&src, i * 1024), 1000,
				       src.mr->lkey };

		OK(post_one(a.qp, 100 + i, IBV_WR_RDMA_WRITE,
			    i == 5 ? IBV_SEND_SIGNALED : 0, &sge, 1,
			    addr_of(&dst, i * 1024 + 24), dst.mr->rkey, 0));
	}
	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 105);
	EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	EXPECT_NONE(a.scq, 300);
	for (int i = 0; i < 6; i++) {
		EXPECT_FILL(dst.p + i * 1024, 24, 0x55);
		EXPECT_PATTERN(dst.p + i * 1024 + 24, 1000, 60 + i);
	}
	EXPECT_FILL(dst.p + 6 * 1024, 2048, 0x55);
	/* One-sided: nothing on b's side. */
	EXPECT_NONE(b.rcq, 0);
	EXPECT_NONE(b.scq, 0);

	free_side(&a);
	free_side(&b);
	free_buf(&src);
	free_buf(&dst);
	close_env(&e);
}

static struct ibv_qp *create_qp_ex_ops(struct env *e, struct ibv_cq *scq,
				       struct ibv_cq *rcq, uint64_t ops)
{
	struct ibv_qp_init_attr_ex xa;

	memset(&xa, 0, sizeof(xa));
	xa.qp_type = IBV_QPT_RC;
	xa.send_cq = scq;
	xa.recv_cq = rcq;
	xa.sq_sig_all = 0;
	xa.cap.max_send_wr = 64;
	xa.cap.max_recv_wr = 64;
	xa.cap.max_send_sge = 4;
	xa.cap.max_recv_sge = 4;
	xa.cap.max_inline_data = 64;
	xa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	xa.pd = e->pd;
	xa.send_ops_flags = ops;
	struct ibv_qp *qp = ibv_create_qp_ex(e->ctx, &xa);

	NOTNULL(qp);
	CHECK(xa.cap.max_inline_data >= 64, "max_inline_data %u",
	      xa.cap.max_inline_data);
	return qp;
}

static void check_wr_api(void)
{
	struct env e = open_env();
	struct side a, b = make_side(&e, 0, 0);
	struct buf loc = make_buf(&e, 16384, 0);
	struct buf win = make_buf(&e, 16384, 0x66);
	struct buf rbuf = make_buf(&e, 4096, 0x77);
	struct ibv_wc wc;

	a.scq = ibv_create_cq(e.ctx, 128, NULL, NULL, 0);
	NOTNULL(a.scq);
	a.rcq = ibv_create_cq(e.ctx, 128, NULL, NULL, 0);
	NOTNULL(a.rcq);
	a.qp = create_qp_ex_ops(&e, a.scq, a.rcq,
				IBV_QP_EX_WITH_RDMA_WRITE |
					IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
					IBV_QP_EX_WITH_SEND |
					IBV_QP_EX_WITH_SEND_WITH_IMM |
					IBV_QP_EX_WITH_RDMA_READ);
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(a.qp);

	NOTNULL(qpx);
	EQ(&qpx->qp_base == a.qp, 1);
	/* A QP made by ibv_create_qp has no extended interface. */
	EQ(ibv_qp_to_qp_ex(b.qp) == NULL, 1);

	connect_pair(&e, &a, &b, ROBUST);
	post_recv(b.qp, 3001, &rbuf, 0, 4096);

	pattern(loc.p, 5000, 71);     /* WRITE source */
	pattern(win.p + 8192, 3000, 73); /* READ source */
	uint8_t inl[40];

	pattern(inl, sizeof(inl), 72);
	struct ibv_sge rd[2] = {
		{ addr_of(&loc, 8192), 1000, loc.mr->lkey },
		{ addr_of(&loc, 12288), 2000, loc.mr->lkey },
	};
	const uint32_t imm = htobe32(0xabcdef01);

	ibv_wr_start(qpx);
	qpx->wr_id = 31;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, win.mr->rkey, addr_of(&win, 100));
	ibv_wr_set_sge(qpx, loc.mr->lkey, addr_of(&loc, 0), 5000);
	qpx->wr_id = 32;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qpx, imm);
	ibv_wr_set_inline_data(qpx, inl, sizeof(inl));
	/* Inline setters copy: the buffer is the program's again. */
	memset(inl, 0xee, sizeof(inl));
	qpx->wr_id = 33;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(qpx, win.mr->rkey, addr_of(&win, 8192));
	ibv_wr_set_sge_list(qpx, 2, rd);
	OK(ibv_wr_complete(qpx));

	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 31);
	EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 32);
	EQ(wc.opcode, IBV_WC_SEND);
	EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 33);
	EQ(wc.opcode, IBV_WC_RDMA_READ);
	EQ(wc.byte_len, 3000);
	EXPECT_NONE(a.scq, 100);

	EXPECT_PATTERN(win.p + 100, 5000, 71);
	EXPECT_FILL(win.p, 100, 0x66);
	EXPECT_FILL(win.p + 5100, 8192 - 5100, 0x66);
	EXPECT_WC(b.rcq, &wc, IBV_WC_SUCCESS, 3001);
	EQ(wc.opcode, IBV_WC_RECV);
	EQ(wc.byte_len, 40);
	EQ(wc.imm_data, imm);
	EQ(wc.wc_flags & IBV_WC_WITH_IMM, IBV_WC_WITH_IMM);
	EXPECT_PATTERN(rbuf.p, 40, 72);
	EXPECT_FILL(rbuf.p + 40, 4096 - 40, 0x77);
	EXPECT_PATTERN(loc.p + 8192, 1000, 73);
	EXPECT_FILL(loc.p + 9192, 12288 - 9192, 0);
	{
		/* The second SGE continues the READ's data at byte 1000. */
		uint8_t want[3000];

		pattern(want, 3000, 73);
		EQ(memcmp(loc.p + 12288, want + 1000, 2000), 0);
	}

	/* A QP made for WRITE only. */
	struct side c = make_side(&e, 0, 0), d = make_side(&e, 0, 0);

	OK(ibv_destroy_qp(c.qp));
	c.qp = create_qp_ex_ops(&e, c.scq, c.rcq, IBV_QP_EX_WITH_RDMA_WRITE);
	qpx = ibv_qp_to_qp_ex(c.qp);
	NOTNULL(qpx);
	connect_pair(&e, &c, &d, ROBUST);
	post_recv(d.qp, 4001, &rbuf, 0, 4096);
	memset(win.p, 0x66, win.len);
	memset(rbuf.p, 0x77, rbuf.len);

	/* A SEND it was not made for: nothing is posted, not even the
	 * valid WRITE before it. */
	ibv_wr_start(qpx);
	qpx->wr_id = 41;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, win.mr->rkey, addr_of(&win, 0));
	ibv_wr_set_sge(qpx, loc.mr->lkey, addr_of(&loc, 0), 64);
	qpx->wr_id = 42;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, loc.mr->lkey, addr_of(&loc, 0), 64);
	EQ(ibv_wr_complete(qpx), EINVAL);

	/* More SGEs than the QP's max_send_sge (4) in the second request:
	 * the whole posting is aborted, the valid first one included. */
	struct ibv_sge five[5];

	for (int i = 0; i < 5; i++) {
		five[i].addr = addr_of(&loc, i * 16);
		five[i].length = 16;
		five[i].lkey = loc.mr->lkey;
	}
	ibv_wr_start(qpx);
	qpx->wr_id = 45;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, win.mr->rkey, addr_of(&win, 0));
	ibv_wr_set_sge(qpx, loc.mr->lkey, addr_of(&loc, 0), 64);
	qpx->wr_id = 46;
	ibv_wr_rdma_write(qpx, win.mr->rkey, addr_of(&win, 1024));
	ibv_wr_set_sge_list(qpx, 5, five);
	EQ(ibv_wr_complete(qpx), EINVAL);

	/* More requests than the send queue holds (max_send_wr 64): none is
	 * posted. */
	ibv_wr_start(qpx);
	for (int i = 0; i < 65; i++) {
		qpx->wr_id = 500 + i;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(qpx, win.mr->rkey, addr_of(&win, i * 8));
		ibv_wr_set_sge(qpx, loc.mr->lkey, addr_of(&loc, 0), 8);
	}
	EQ(ibv_wr_complete(qpx), ENOMEM);

	/* An atomic: EOPNOTSUPP. */
	ibv_wr_start(qpx);
	qpx->wr_id = 43;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(qpx, win.mr->rkey, addr_of(&win, 64), 1);
	ibv_wr_set_sge(qpx, loc.mr->lkey, addr_of(&loc, 0), 8);
	EQ(ibv_wr_complete(qpx), EOPNOTSUPP);

	EXPECT_NONE(c.scq, 300);
	EXPECT_NONE(d.rcq, 0);
	EXPECT_FILL(win.p, win.len, 0x66);
	EXPECT_FILL(rbuf.p, rbuf.len, 0x77);
	EQ(query_state(c.qp), IBV_QPS_RTS);

	/* The QP is still good for what it was made for. */
	ibv_wr_start(qpx);
	qpx->wr_id = 44;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, win.mr->rkey, addr_of(&win, 0));
	ibv_wr_set_sge(qpx, loc.mr->lkey, addr_of(&loc, 0), 64);
	OK(ibv_wr_complete(qpx));
	EXPECT_WC(c.scq, &wc, IBV_WC_SUCCESS, 44);
	EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	EXPECT_PATTERN(win.p, 64, 71);
	EXPECT_NONE(c.scq, 100);
	EXPECT_NONE(d.rcq, 0);

	free_side(&a);
	free_side(&b);
	free_side(&c);
	free_side(&d);
	free_buf(&loc);
	free_buf(&win);
	free_buf(&rbuf);
	close_env(&e);
}

static void check_rnr(void)
{
	struct env e = open_env();
	struct side a = make_side(&e, 0, 0), b = make_side(&e, 0, 0);
	struct buf src = make_buf(&e, 4096, 0), rbuf = make_buf(&e, 4096, 0);
	struct timing t = ROBUST;
	struct ibv_wc wc;

	t.rnr_retry = 1;
	connect_pair(&e, &a, &b, t);
	struct ibv_sge sge = { addr_of(&src, 0), 100, src.mr->lkey };

	/* b has no receive posted. */
	OK(post_one(a.qp, 51, IBV_WR_SEND, IBV_SEND_SIGNALED, &sge, 1, 0, 0,
		    0));
	EXPECT_WC(a.scq, &wc, IBV_WC_RNR_RETRY_EXC_ERR, 51);
	EQ(query_state(a.qp), IBV_QPS_ERR);

	/* In ERR, posts are accepted and flushed, unsignalled ones too. */
	OK(post_one(a.qp, 52, IBV_WR_SEND, IBV_SEND_SIGNALED, &sge, 1, 0, 0,
		    0));
	EXPECT_WC(a.scq, &wc, IBV_WC_WR_FLUSH_ERR, 52);
	OK(post_one(a.qp, 53, IBV_WR_SEND, 0, &sge, 1, 0, 0, 0));
	EXPECT_WC(a.scq, &wc, IBV_WC_WR_FLUSH_ERR, 53);
	post_recv(a.qp, 54, &rbuf, 0, 100);
	EXPECT_WC(a.rcq, &wc, IBV_WC_WR_FLUSH_ERR, 54);
	EXPECT_NONE(a.scq, 100);
	EXPECT_NONE(a.rcq, 0);

	/* The responder only said "not ready": it is still up, and nothing
	 * reached it. */
	EQ(query_state(b.qp), IBV_QPS_RTS);
	EXPECT_NONE(b.rcq, 0);

	free_side(&a);
	free_side(&b);
	free_buf(&src);
	free_buf(&rbuf);
	close_env(&e);
}

static void check_not_ready_peer_drops(void)
{
	struct env e = open_env();
	struct side a = make_side(&e, 0, 0), b = make_side(&e, 0, 0);
	struct buf src = make_buf(&e, 4096, 0), dst = make_buf(&e, 4096, 0x88);
	struct ibv_wc wc;

	/* b stays in INIT: its requests are dropped, never answered. */
	OK(modify_init(b.qp));
	bring_up(&e, a.qp, b.qp, SHORT);
	pattern(src.p, 4096, 91);
	OK(post_write(&a, 61, &src, 0, 4096, addr_of(&dst, 0), dst.mr->rkey));
	EXPECT_WC(a.scq, &wc, IBV_WC_RETRY_EXC_ERR, 61);
	EQ(query_state(a.qp), IBV_QPS_ERR);
	EQ(query_state(b.qp), IBV_QPS_INIT);
	EXPECT_FILL(dst.p, 4096, 0x88);
	EXPECT_NONE(b.rcq, 0);

	free_side(&a);
	free_side(&b);
	free_buf(&src);
	free_buf(&dst);
	close_env(&e);
}

/* One WRITE that the responder must refuse with a remote access error:
 * on a new pair, since both QPs end in ERR. */
static void write_refused(struct env *e, struct buf *src, uint32_t len,
			  uint64_t raddr, uint32_t rkey, uint8_t *watch,
			  size_t watch_len, uint8_t fill)
{
	struct side a = make_side(e, 0, 0), b = make_side(e, 0, 0);
	struct ibv_wc wc;

	connect_pair(e, &a, &b, ROBUST);
	OK(post_write(&a, 71, src, 0, len, raddr, rkey));
	EXPECT_WC(a.scq, &wc, IBV_WC_REM_ACCESS_ERR, 71);
	EQ(query_state(a.qp), IBV_QPS_ERR);
	EXPECT_FILL(watch, watch_len, fill);
	EXPECT_NONE(a.scq, 50);
	EXPECT_NONE(b.rcq, 0);
	free_side(&a);
	free_side(&b);
}

static void check_remote_access(void)
{
	struct env e = open_env();
	struct buf src = make_buf(&e, 8192, 0);
	uint8_t *mem;

	pattern(src.p, 8192, 99);
	CHECK(posix_memalign((void **)&mem, 4096, 3 * 4096) == 0, "no memory");
	memset(mem, 0x5a, 3 * 4096);
	/* A region of 4096 bytes in the middle of the allocation: the bytes
	 * on either side are there to see that nothing lands outside it. */
	struct ibv_mr *mr = ibv_reg_mr(e.pd, mem + 4096, 4096, ACCESS_ALL);

	NOTNULL(mr);
	uint64_t base = (uint64_t)(uintptr_t)(mem + 4096);

	/* A wrong rkey. */
	write_refused(&e, &src, 64, base, mr->rkey ^ 0x00ff00ffu, mem,
		      3 * 4096, 0x5a);
	/* One byte past the end of the region. */
	write_refused(&e, &src, 512, base + 4096 - 511, mr->rkey, mem,
		      3 * 4096, 0x5a);
	/* A region without remote write. */
	struct ibv_mr *ro = ibv_reg_mr(e.pd, mem + 4096, 4096,
				       IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_READ);

	NOTNULL(ro);
	write_refused(&e, &src, 64, base, ro->rkey, mem, 3 * 4096, 0x5a);

	/* And a WRITE that fits exactly is fine. */
	{
		struct side a = make_side(&e, 0, 0), b = make_side(&e, 0, 0);
		struct ibv_wc wc;

		connect_pair(&e, &a, &b, ROBUST);
		OK(post_write(&a, 72, &src, 0, 512, base + 4096 - 512,
			      mr->rkey));
		EXPECT_WC(a.scq, &wc, IBV_WC_SUCCESS, 72);
		EXPECT_PATTERN(mem + 8192 - 512, 512, 99);
		EXPECT_FILL(mem, 8192 - 512, 0x5a);
		EXPECT_FILL(mem + 8192, 4096, 0x5a);
		free_side(&a);
		free_side(&b);
	}

	OK(ibv_dereg_mr(ro));
	OK(ibv_dereg_mr(mr));
	free(mem);
	free_buf(&src);
	close_env(&e);
}

static void check_events(void)
{
	struct env e = open_env();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(e.ctx);
	static int tag_s, tag_r;

	NOTNULL(ch);
	CHECK(ch->fd >= 0, "channel fd %d", ch->fd);
	EQ(ch->context == e.ctx, 1);
	struct ibv_cq *scq = ibv_create_cq(e.ctx, 64, &tag_s, ch, 0);
	struct ibv_cq *rcq = ibv_create_cq(e.ctx, 64, &tag_r, ch, 0);

	NOTNULL(scq);
	NOTNULL(rcq);
	EQ(scq->channel == ch, 1);
	EQ(scq->cq_context == &tag_s, 1);
	/* a sends on scq, b receives on rcq; their other CQs are plain. */
	struct side a, b;

	a.scq = scq;
	a.rcq = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	NOTNULL(a.rcq);
	a.qp = create_rc(&e, a.scq, a.rcq, 0, 0);
	b.scq = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	NOTNULL(b.scq);
	b.rcq = rcq;
	b.qp = create_rc(&e, b.scq, b.rcq, 0, 0);
	connect_pair(&e, &a, &b, ROBUST);
	struct buf src = make_buf(&e, 4096, 0), dst = make_buf(&e, 4096, 0);
	struct ibv_wc wc;
	struct pollfd pfd = { ch->fd, POLLIN, 0 };
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	post_recv(b.qp, 81, &dst, 0, 4096);
	OK(ibv_req_notify_cq(scq, 0));
	OK(ibv_req_notify_cq(rcq, 0));
	EQ(poll(&pfd, 1, 0), 0);

	/* A WRITE completes on scq only: its event, blocking. */
	pattern(src.p, 256, 111);
	OK(post_write(&a, 82, &src, 0, 256, addr_of(&dst, 2048), dst.mr->rkey));
	pfd.revents = 0;
	EQ(poll(&pfd, 1, WAIT_MS), 1);
	EQ(pfd.revents & POLLIN, POLLIN);
	ev_cq = NULL;
	ev_ctx = NULL;
	OK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx));
	EQ(ev_cq == scq, 1);
	EQ(ev_ctx == &tag_s, 1);
	ibv_ack_cq_events(ev_cq, 1);
	EXPECT_WC(scq, &wc, IBV_WC_SUCCESS, 82);
	EXPECT_PATTERN(dst.p + 2048, 256, 111);

	/* Non-blocking, nothing pending (rcq armed, nothing on it; scq not
	 * re-armed): EAGAIN. */
	int fl = fcntl(ch->fd, F_GETFL);

	CHECK(fl >= 0, "F_GETFL: %s", strerror(errno));
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "F_SETFL: %s",
	      strerror(errno));
	errno = 0;
	EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
	EQ(errno, EAGAIN);
	EQ(poll(&pfd, 1, 0), 0);

	/* A SEND completes on both: only the armed rcq raises an event,
	 * and poll(2) sees it. */
	OK(post_one(a.qp, 83, IBV_WR_SEND, IBV_SEND_SIGNALED,
		    &(struct ibv_sge){ addr_of(&src, 0), 300, src.mr->lkey },
		    1, 0, 0, 0));
	pfd.revents = 0;
	EQ(poll(&pfd, 1, WAIT_MS), 1);
	EQ(pfd.revents & POLLIN, POLLIN);
	ev_cq = NULL;
	ev_ctx = NULL;
	OK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx));
	EQ(ev_cq == rcq, 1);
	EQ(ev_ctx == &tag_r, 1);
	ibv_ack_cq_events(ev_cq, 1);
	EXPECT_WC(rcq, &wc, IBV_WC_SUCCESS, 81);
	EQ(wc.opcode, IBV_WC_RECV);
	EQ(wc.byte_len, 300);
	EXPECT_WC(scq, &wc, IBV_WC_SUCCESS, 83);
	EQ(wc.opcode, IBV_WC_SEND);
	errno = 0;
	EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
	EQ(errno, EAGAIN);

	/* Re-armed, the next completion raises one event again. */
	OK(ibv_req_notify_cq(scq, 0));
	OK(post_write(&a, 84, &src, 0, 16, addr_of(&dst, 0), dst.mr->rkey));
	pfd.revents = 0;
	EQ(poll(&pfd, 1, WAIT_MS), 1);
	OK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx));
	EQ(ev_cq == scq, 1);
	ibv_ack_cq_events(ev_cq, 1);
	EXPECT_WC(scq, &wc, IBV_WC_SUCCESS, 84);
	EQ(scq->comp_events_completed, 2);
	EQ(rcq->comp_events_completed, 1);

	OK(ibv_destroy_qp(a.qp));
	OK(ibv_destroy_qp(b.qp));
	OK(ibv_destroy_cq(a.rcq));
	OK(ibv_destroy_cq(b.scq));
	OK(ibv_destroy_cq(scq));
	OK(ibv_destroy_cq(rcq));
	OK(ibv_destroy_comp_channel(ch));
	free_buf(&src);
	free_buf(&dst);
	close_env(&e);
}

static void check_busy(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	NOTNULL(list);
	struct ibv_context *ctx = ibv_open_device(list[0]);

	NOTNULL(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	NOTNULL(pd);
	uint8_t *mem = malloc(4096);

	NOTNULL(mem);
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE);

	NOTNULL(mr);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);

	NOTNULL(ch);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);

	NOTNULL(cq);
	struct ibv_cq *cq2 = ibv_create_cq(ctx, 16, NULL, NULL, 0);

	NOTNULL(cq2);
	struct env e = { ctx, pd, { { 0 } } };
	struct ibv_qp *qp = create_rc(&e, cq2, cq, 0, 0);

	EQ(ibv_dealloc_pd(pd), EBUSY);
	EQ(ibv_destroy_cq(cq), EBUSY);
	EQ(ibv_destroy_cq(cq2), EBUSY);
	EQ(ibv_destroy_comp_channel(ch), EBUSY);

	OK(ibv_destroy_qp(qp));
	EQ(ibv_dealloc_pd(pd), EBUSY); /* the region is still there */
	EQ(ibv_destroy_comp_channel(ch), EBUSY); /* and cq on it */
	OK(ibv_destroy_cq(cq2));
	OK(ibv_destroy_cq(cq));
	OK(ibv_destroy_comp_channel(ch));
	OK(ibv_dereg_mr(mr));
	OK(ibv_dealloc_pd(pd));
	OK(ibv_close_device(ctx));
	ibv_free_device_list(list);
	free(mem);
}

static const struct {
	const char *name;
	void (*run)(void);
} checks[] = {
	{ "devices", check_devices },
	{ "unsupported", check_unsupported },
	{ "state_machine", check_state_machine },
	{ "write_imm_and_send_imm", check_write_imm_and_send_imm },
	{ "inline_and_sges", check_inline_and_sges },
	{ "unsignalled", check_unsignalled },
	{ "wr_api", check_wr_api },
	{ "rnr", check_rnr },
	{ "not_ready_peer_drops", check_not_ready_peer_drops },
	{ "remote_access", check_remote_access },
	{ "events", check_events },
	{ "busy", check_busy },
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: %s CHECK|all\n", argv[0]);
		return 2;
	}
	/* A check that hangs is a failure, not a stuck test. */
	alarm(100);
	int ran = 0;

	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		if (strcmp(argv[1], "all") && strcmp(argv[1], checks[i].name))
			continue;
		check_name = checks[i].name;
		checks[i].run();
		printf("ok %s\n", checks[i].name);
		ran++;
	}
	if (!ran) {
		fprintf(stderr, "no check named %s\n", argv[1]);
		return 2;
	}
	return 0;
}
