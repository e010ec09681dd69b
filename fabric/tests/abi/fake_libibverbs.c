/*
 * A fake libibverbs.so.1 for the verbs provider's tests: it exports the
 * functions the provider resolves, hands out one device ("fake0") whose
 * context is a real `struct verbs_context` with the provider entries
 * (query_port, poll_cq, post_send, post_recv) filled in, and logs every
 * call with its arguments, so a test can check exactly what the Rust side
 * passed through the ABI. It is compiled against the real
 * <infiniband/verbs.h>, so every structure it reads or writes has the
 * header's layout.
 *
 * Knobs (exported, called by the tests through dlsym):
 *   fake_set_mode(m):     0 one device; 1 an empty list; 2 NULL with ENOSYS;
 *                         3 NULL with EACCES
 *   fake_set_extended(e): 1 (default) the context is a verbs_context with
 *                         query_port; 0 a plain ibv_context (abi_compat NULL)
 *   fake_log(), fake_clear_log(), fake_live_objects()
 *
 * Compile-time variants: -DNO_OPTIONAL leaves out ibv_reg_mr_iova2,
 * ibv_reg_dmabuf_mr, the completion channel functions and those DC needs
 * (ibv_create_ah, ibv_destroy_ah, ibv_create_srq, ibv_destroy_srq,
 * ibv_qp_to_qp_ex); -DNO_CREATE_QP leaves out ibv_create_qp.
 *
 * For the fake libmlx5 (fake_libmlx5.c, linked to this library), a few
 * more exports: fake_log_line() adds to this log, fake_new_qp() makes a QP
 * that ibv_modify_qp, ibv_query_qp and ibv_destroy_qp here accept (with
 * an extended ibv_qp_ex view and a driver area, fake_qp_driver()), and
 * fake_push_wc() completes on a CQ.
 *
 * Completion channels: a pipe; a completion pushed on a CQ armed with
 * req_notify_cq writes one byte (one event) and disarms it.
 *
 * Completions: each send WR completes on the send CQ (wr_id 0xbad with
 * RETRY_EXC_ERR and vendor_err 0x81); a *_WITH_IMM also completes a
 * receive on the QP's receive CQ carrying the immediate. wr_id 0xf011
 * makes post_send fail with ENOMEM.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

static char logbuf[1 << 16];
static size_t loglen;
static int mode;
static int extended = 1;
static int live_objects;
static uint32_t next_key = 0x1000;
static uint32_t next_qpn = 0x100;

static void logf_(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (loglen >= sizeof(logbuf) - 2)
		return;
	va_start(ap, fmt);
	n = vsnprintf(logbuf + loglen, sizeof(logbuf) - loglen - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	loglen += (size_t)n;
	if (loglen > sizeof(logbuf) - 2)
		loglen = sizeof(logbuf) - 2;
	logbuf[loglen++] = '\n';
	logbuf[loglen] = 0;
}

const char *fake_log(void) { return logbuf; }
void fake_clear_log(void) { loglen = 0; logbuf[0] = 0; }
void fake_set_mode(int m) { mode = m; }
void fake_set_extended(int e) { extended = e; }
int fake_live_objects(void) { return live_objects; }

static struct ibv_device device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "fake0",
	.dev_name = "uverbs0",
};

struct fake_cq {
	struct ibv_cq cq;
	struct ibv_wc wcs[256];
	int head, tail;
	int armed;
	unsigned int unacked;
};

struct fake_channel {
	struct ibv_comp_channel ch;
	int wfd;
	struct ibv_cq *last;
};

struct fake_qp {
	struct ibv_qp_ex qpx; /* qpx.qp_base first: an ibv_qp * is a fake_qp * */
	struct ibv_qp_attr attr;
	int is_ex;
	uint64_t driver[64];
};

static void push_wc(struct ibv_cq *cq, const struct ibv_wc *wc)
{
	struct fake_cq *f = (struct fake_cq *)cq;

	if (f->tail - f->head < 256)
		f->wcs[f->tail++ % 256] = *wc;
	if (f->armed && cq->channel) {
		struct fake_channel *c = (struct fake_channel *)cq->channel;
		char one = 1;

		f->armed = 0;
		c->last = cq;
		if (write(c->wfd, &one, 1) != 1)
			logf_("event write failed");
	}
}

void fake_push_wc(struct ibv_cq *cq, const struct ibv_wc *wc) { push_wc(cq, wc); }
void fake_log_line(const char *line) { logf_("%s", line); }

struct ibv_qp *fake_new_qp(struct ibv_pd *pd, struct ibv_cq *send_cq,
			   struct ibv_cq *recv_cq, struct ibv_srq *srq,
			   int qp_type, int is_ex)
{
	struct fake_qp *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->qpx.qp_base.context = pd->context;
	f->qpx.qp_base.pd = pd;
	f->qpx.qp_base.send_cq = send_cq;
	f->qpx.qp_base.recv_cq = recv_cq;
	f->qpx.qp_base.srq = srq;
	f->qpx.qp_base.qp_num = next_qpn++;
	f->qpx.qp_base.qp_type = qp_type;
	f->qpx.qp_base.state = IBV_QPS_RESET;
	f->is_ex = is_ex;
	live_objects++;
	return &f->qpx.qp_base;
}

void *fake_qp_driver(struct ibv_qp *qp) { return ((struct fake_qp *)qp)->driver; }

static int fake_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	logf_("req_notify_cq solicited_only=%d", solicited_only);
	((struct fake_cq *)cq)->armed = 1;
	return 0;
}

#ifndef NO_OPTIONAL
struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct fake_channel *c = calloc(1, sizeof(*c));
	int p[2];

	if (!c)
		return NULL;
	if (pipe(p) != 0) {
		free(c);
		return NULL;
	}
	c->ch.context = ctx;
	c->ch.fd = p[0];
	c->wfd = p[1];
	live_objects++;
	logf_("create_comp_channel");
	return &c->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	struct fake_channel *c = (struct fake_channel *)ch;

	logf_("destroy_comp_channel nonblocking=%d",
	      (fcntl(ch->fd, F_GETFL) & O_NONBLOCK) != 0);
	close(ch->fd);
	close(c->wfd);
	free(c);
	live_objects--;
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq,
		     void **cq_context)
{
	struct fake_channel *c = (struct fake_channel *)ch;
	char b;

	if (read(ch->fd, &b, 1) != 1)
		return -1;
	*cq = c->last;
	*cq_context = c->last->cq_context;
	((struct fake_cq *)c->last)->unacked++;
	logf_("get_cq_event");
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	((struct fake_cq *)cq)->unacked -= n;
	logf_("ack_cq_events n=%u", n);
}
#endif

struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **l;

	*num = 0;
	switch (mode) {
	case 2:
		errno = ENOSYS;
		return NULL;
	case 3:
		errno = EACCES;
		return NULL;
	}
	l = calloc(2, sizeof(*l));
	if (!l)
		return NULL;
	if (mode == 0) {
		l[0] = &device;
		*num = 1;
	}
	live_objects++;
	logf_("get_device_list n=%d", *num);
	return l;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
	live_objects--;
	logf_("free_device_list");
}

const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }
__be64 ibv_get_device_guid(struct ibv_device *d) { (void)d; return 0; }

static int fake_query_port_ex(struct ibv_context *ctx, uint8_t port,
			      struct ibv_port_attr *attr, size_t len)
{
	(void)ctx;
	logf_("query_port_ex port=%u len=%zu", port, len);
	if (port != 1 || len != sizeof(*attr))
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = IBV_MTU_1024;
	attr->gid_tbl_len = 4;
	attr->max_msg_sz = 1u << 31;
	attr->lid = 0;
	attr->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

int ibv_query_port(struct ibv_context *ctx, uint8_t port,
		   struct _compat_ibv_port_attr *cattr)
{
	/* The header's ___ibv_query_port zeroes a full ibv_port_attr first. */
	struct ibv_port_attr *attr = (struct ibv_port_attr *)cattr;

	(void)ctx;
	logf_("query_port_compat port=%u", port);
	if (port != 1)
		return EINVAL;
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = IBV_MTU_2048;
	attr->gid_tbl_len = 4;
	attr->max_msg_sz = 1u << 30;
	attr->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fake_cq *f = (struct fake_cq *)cq;
	int i = 0;

	while (i < n && f->head < f->tail)
		wc[i++] = f->wcs[f->head++ % 256];
	return i;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	for (; wr; wr = wr->next) {
		struct ibv_wc wc = { 0 };
		uint32_t len = 0;
		int i;

		for (i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		logf_("post_send qpn=0x%x wr_id=0x%llx opcode=%d flags=0x%x num_sge=%d sge0=0x%llx/%u/0x%x imm=0x%x remote=0x%llx rkey=0x%x next=%s",
		      qp->qp_num, (unsigned long long)wr->wr_id, wr->opcode,
		      wr->send_flags, wr->num_sge,
		      wr->num_sge ? (unsigned long long)wr->sg_list[0].addr : 0ULL,
		      wr->num_sge ? wr->sg_list[0].length : 0,
		      wr->num_sge ? wr->sg_list[0].lkey : 0, wr->imm_data,
		      (unsigned long long)wr->wr.rdma.remote_addr, wr->wr.rdma.rkey,
		      wr->next ? "yes" : "null");
		if (wr->wr_id == 0xf011) {
			*bad = wr;
			return ENOMEM;
		}
		wc.wr_id = wr->wr_id;
		wc.qp_num = qp->qp_num;
		wc.byte_len = len;
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			wc.opcode = IBV_WC_RDMA_WRITE;
			break;
		case IBV_WR_RDMA_READ:
			wc.opcode = IBV_WC_RDMA_READ;
			break;
		default:
			wc.opcode = IBV_WC_SEND;
		}
		if (wr->wr_id == 0xbad) {
			wc.status = IBV_WC_RETRY_EXC_ERR;
			wc.vendor_err = 0x81;
			wc.opcode = 0x55; /* undefined in error completions */
		}
		if (wr->wr_id == 0xbad || (wr->send_flags & IBV_SEND_SIGNALED))
			push_wc(qp->send_cq, &wc);
		if (wr->opcode == IBV_WR_SEND_WITH_IMM ||
		    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
			struct ibv_wc r = { 0 };

			r.wr_id = 0x7ec;
			r.opcode = wr->opcode == IBV_WR_SEND_WITH_IMM ?
					   IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM;
			r.wc_flags = IBV_WC_WITH_IMM;
			r.imm_data = wr->imm_data;
			r.byte_len = wr->opcode == IBV_WR_SEND_WITH_IMM ? len : 0;
			r.qp_num = qp->qp_num;
			r.src_qp = 0x4242;
			push_wc(qp->recv_cq, &r);
		}
	}
	return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad)
{
	(void)bad;
	for (; wr; wr = wr->next)
		logf_("post_recv qpn=0x%x wr_id=0x%llx num_sge=%d sge0=0x%llx/%u/0x%x next=%s",
		      qp->qp_num, (unsigned long long)wr->wr_id, wr->num_sge,
		      wr->num_sge ? (unsigned long long)wr->sg_list[0].addr : 0ULL,
		      wr->num_sge ? wr->sg_list[0].length : 0,
		      wr->num_sge ? wr->sg_list[0].lkey : 0,
		      wr->next ? "yes" : "null");
	return 0;
}

struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	struct verbs_context *v = calloc(1, sizeof(*v));
	struct ibv_context *ctx;

	if (!v)
		return NULL;
	ctx = &v->context;
	ctx->device = d;
	ctx->ops.poll_cq = fake_poll_cq;
	ctx->ops.req_notify_cq = fake_req_notify_cq;
	ctx->ops.post_send = fake_post_send;
	ctx->ops.post_recv = fake_post_recv;
	if (extended) {
		v->sz = sizeof(*v);
		v->query_port = fake_query_port_ex;
		ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	}
	live_objects++;
	logf_("open_device %s extended=%d", d->name, extended);
	return ctx;
}

int ibv_close_device(struct ibv_context *ctx)
{
	logf_("close_device");
	free((char *)ctx - offsetof(struct verbs_context, context));
	live_objects--;
	return 0;
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	(void)ctx;
	memset(attr, 0, sizeof(*attr));
	strcpy(attr->fw_ver, "1.2.3");
	attr->vendor_id = 0x14e4;
	attr->vendor_part_id = 0x1750;
	attr->max_mr_size = 1ULL << 40;
	attr->phys_port_cnt = 1;
	attr->max_qp_rd_atom = 16;
	logf_("query_device");
	return 0;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	(void)ctx;
	memset(gid, 0, sizeof(*gid));
	if (port != 1)
		return EINVAL;
	switch (index) {
	case 0: /* fe80::1 */
		gid->raw[0] = 0xfe;
		gid->raw[1] = 0x80;
		gid->raw[15] = 1;
		return 0;
	case 1: /* unconfigured: all zero */
		return 0;
	case 2: /* ::ffff:10.0.0.1 */
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		gid->raw[12] = 10;
		gid->raw[15] = 1;
		return 0;
	default:
		return EINVAL;
	}
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pd->context = ctx;
	live_objects++;
	logf_("alloc_pd");
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	logf_("dealloc_pd");
	free(pd);
	live_objects--;
	return 0;
}

static struct ibv_mr *new_mr(struct ibv_pd *pd, void *addr, size_t len)
{
	struct ibv_mr *mr = calloc(1, sizeof(*mr));

	if (!mr)
		return NULL;
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = len;
	mr->lkey = next_key;
	mr->rkey = next_key + 0x800;
	next_key++;
	live_objects++;
	return mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	logf_("reg_mr len=%zu access=%#x", len, access);
	if (len == 0) {
		errno = EINVAL;
		return NULL;
	}
	return new_mr(pd, addr, len);
}

#ifndef NO_OPTIONAL
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len,
				uint64_t iova, unsigned int access)
{
	logf_("reg_mr_iova2 len=%zu iova_is_addr=%d access=%#x", len,
	      iova == (uintptr_t)addr, access);
	return new_mr(pd, addr, len);
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len,
				 uint64_t iova, int fd, int access)
{
	logf_("reg_dmabuf_mr offset=%llu len=%zu iova=%#llx fd=%d access=%#x",
	      (unsigned long long)offset, len, (unsigned long long)iova, fd, access);
	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	/* As rdma-core: the MR's addr is the offset, not the iova. */
	return new_mr(pd, (void *)(uintptr_t)offset, len);
}
#endif

int ibv_dereg_mr(struct ibv_mr *mr)
{
	logf_("dereg_mr lkey=%#x", mr->lkey);
	free(mr);
	live_objects--;
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct fake_cq *f = calloc(1, sizeof(*f));

	logf_("create_cq cqe=%d channel=%s vector=%d", cqe,
	      channel ? "set" : "null", comp_vector);
	if (!f)
		return NULL;
	f->cq.context = ctx;
	f->cq.channel = channel;
	f->cq.cq_context = cq_context;
	f->cq.cqe = cqe + 1; /* real devices round up */
	live_objects++;
	return &f->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	logf_("destroy_cq cqe=%d unacked=%u", cq->cqe,
	      ((struct fake_cq *)cq)->unacked);
	free(cq);
	live_objects--;
	return 0;
}

#ifndef NO_CREATE_QP
struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	logf_("create_qp type=%d send_wr=%u recv_wr=%u send_sge=%u recv_sge=%u inline=%u sq_sig_all=%d same_cq=%d srq=%s",
	      init->qp_type, init->cap.max_send_wr, init->cap.max_recv_wr,
	      init->cap.max_send_sge, init->cap.max_recv_sge,
	      init->cap.max_inline_data, init->sq_sig_all,
	      init->send_cq == init->recv_cq, init->srq ? "set" : "null");
	return fake_new_qp(pd, init->send_cq, init->recv_cq, init->srq,
			   init->qp_type, 0);
}
#endif

#ifndef NO_OPTIONAL
static uint32_t next_ah = 1;

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct fake_qp *f = (struct fake_qp *)qp;

	return f->is_ex ? &f->qpx : NULL;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	struct ibv_ah *ah;
	char dgid[33];
	int i;

	for (i = 0; i < 16; i++)
		sprintf(dgid + 2 * i, "%02x", a->grh.dgid.raw[i]);
	logf_("create_ah is_global=%u dgid=%s sgid_index=%u hop=%u tclass=%u flow=%u dlid=%u sl=%u src_path_bits=%u rate=%u port=%u",
	      a->is_global, dgid, a->grh.sgid_index, a->grh.hop_limit,
	      a->grh.traffic_class, a->grh.flow_label, a->dlid, a->sl,
	      a->src_path_bits, a->static_rate, a->port_num);
	if (a->port_num != 1) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	ah->context = pd->context;
	ah->pd = pd;
	ah->handle = next_ah++;
	live_objects++;
	return ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	logf_("destroy_ah handle=%u", ah->handle);
	free(ah);
	live_objects--;
	return 0;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
	struct ibv_srq *srq = calloc(1, sizeof(*srq));

	logf_("create_srq max_wr=%u max_sge=%u limit=%u", init->attr.max_wr,
	      init->attr.max_sge, init->attr.srq_limit);
	if (!srq)
		return NULL;
	srq->context = pd->context;
	srq->pd = pd;
	live_objects++;
	return srq;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
	logf_("destroy_srq");
	free(srq);
	live_objects--;
	return 0;
}
#endif

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct fake_qp *f = (struct fake_qp *)qp;
	char dgid[33];
	int i;

	for (i = 0; i < 16; i++)
		sprintf(dgid + 2 * i, "%02x", a->ah_attr.grh.dgid.raw[i]);
	logf_("modify_qp mask=%#x state=%d mtu=%d dest_qpn=%#x rq_psn=%u sq_psn=%u access=%#x pkey=%u port=%u is_global=%u dgid=%s sgid_index=%u hop=%u tclass=%u flow=%u dlid=%u sl=%u ah_port=%u timeout=%u retry=%u rnr_retry=%u min_rnr=%u rd_atomic=%u dest_rd_atomic=%u",
	      mask, a->qp_state, a->path_mtu, a->dest_qp_num, a->rq_psn,
	      a->sq_psn, a->qp_access_flags, a->pkey_index, a->port_num,
	      a->ah_attr.is_global, dgid, a->ah_attr.grh.sgid_index,
	      a->ah_attr.grh.hop_limit, a->ah_attr.grh.traffic_class,
	      a->ah_attr.grh.flow_label, a->ah_attr.dlid, a->ah_attr.sl,
	      a->ah_attr.port_num, a->timeout, a->retry_cnt, a->rnr_retry,
	      a->min_rnr_timer, a->max_rd_atomic, a->max_dest_rd_atomic);
	if (mask & IBV_QP_STATE) {
		if (a->qp_state == IBV_QPS_RTS && qp->state != IBV_QPS_RTR)
			return EINVAL;
		qp->state = a->qp_state;
	}
	if (mask & IBV_QP_AV)
		f->attr.ah_attr = a->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		f->attr.path_mtu = a->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		f->attr.dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_ACCESS_FLAGS)
		f->attr.qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PORT)
		f->attr.port_num = a->port_num;
	if (mask & IBV_QP_TIMEOUT)
		f->attr.timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		f->attr.retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		f->attr.rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_SQ_PSN)
		f->attr.sq_psn = a->sq_psn;
	if (mask & IBV_QP_RQ_PSN)
		f->attr.rq_psn = a->rq_psn;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		f->attr.max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		f->attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		f->attr.min_rnr_timer = a->min_rnr_timer;
	return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
		 struct ibv_qp_init_attr *init)
{
	struct fake_qp *f = (struct fake_qp *)qp;

	logf_("query_qp mask=%#x", mask);
	*a = f->attr;
	a->qp_state = qp->state;
	memset(init, 0, sizeof(*init));
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	logf_("destroy_qp qpn=%#x type=%d", qp->qp_num, qp->qp_type);
	free(qp);
	live_objects--;
	return 0;
}
