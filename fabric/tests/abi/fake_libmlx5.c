/*
 * A fake libmlx5.so for the DC tests: the three mlx5dv functions the
 * provider resolves (mlx5dv_is_supported, mlx5dv_create_qp,
 * mlx5dv_qp_ex_from_ibv_qp_ex) and, on each DC initiator, the ibv_qp_ex
 * work-request builder and mlx5dv_qp_ex's wr_set_dc_addr. Every call is
 * logged with its arguments into the fake libibverbs' log (this library
 * is linked to it: fake_log_line, fake_new_qp, fake_qp_driver,
 * fake_push_wc), so a test sees one log in call order. Compiled against
 * the real <infiniband/mlx5dv.h>.
 *
 * Knobs: fake_mlx5_set_supported(s) (1 by default: every device is mlx5),
 * fake_mlx5_set_complete_rc(rc) (what wr_complete returns; 0 by default).
 *
 * As the kernel does, a DCT without an SRQ and a QP whose type is not
 * IBV_QPT_DRIVER or without MLX5DV_QP_INIT_ATTR_MASK_DC are refused with
 * EINVAL. wr_complete pushes one completion on the send CQ when the WR is
 * signaled (byte_len the SGEs' total, opcode RDMA_WRITE or RDMA_READ).
 */
#define _GNU_SOURCE
#include <infiniband/mlx5dv.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void fake_log_line(const char *line);
struct ibv_qp *fake_new_qp(struct ibv_pd *pd, struct ibv_cq *send_cq,
			   struct ibv_cq *recv_cq, struct ibv_srq *srq,
			   int qp_type, int is_ex);
void *fake_qp_driver(struct ibv_qp *qp);
void fake_push_wc(struct ibv_cq *cq, const struct ibv_wc *wc);

static int supported = 1;
static int complete_rc;

void fake_mlx5_set_supported(int s) { supported = s; }
void fake_mlx5_set_complete_rc(int rc) { complete_rc = rc; }

/* The driver area of a DC QP (in the fake libibverbs' QP). */
struct fake_dc {
	struct mlx5dv_qp_ex mqpx;
	struct ibv_qp_ex *qpx;
	enum ibv_wc_opcode opcode;
	uint32_t len;
	int open;
};

static void logline(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fake_log_line(line);
}

static struct fake_dc *dc_of(struct ibv_qp_ex *qpx)
{
	return fake_qp_driver(&qpx->qp_base);
}

bool mlx5dv_is_supported(struct ibv_device *device)
{
	logline("mlx5dv_is_supported dev=%s", device->name);
	return supported;
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct fake_dc *d = dc_of(qpx);

	logline("wr_start qpn=%#x open=%d", qpx->qp_base.qp_num, d->open);
	d->open = 1;
	d->len = 0;
}

static void wr_rdma(struct ibv_qp_ex *qpx, const char *what,
		    enum ibv_wc_opcode op, uint32_t rkey, uint64_t remote)
{
	logline("%s wr_id=%#llx flags=%#x rkey=%#x remote=%#llx", what,
	     (unsigned long long)qpx->wr_id, qpx->wr_flags, rkey,
	     (unsigned long long)remote);
	dc_of(qpx)->opcode = op;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote)
{
	wr_rdma(qpx, "wr_rdma_write", IBV_WC_RDMA_WRITE, rkey, remote);
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote)
{
	wr_rdma(qpx, "wr_rdma_read", IBV_WC_RDMA_READ, rkey, remote);
}

static void wr_set_dc_addr(struct mlx5dv_qp_ex *mqp, struct ibv_ah *ah,
			   uint32_t dctn, uint64_t key)
{
	(void)mqp;
	logline("wr_set_dc_addr ah=%u dctn=%#x key=%#llx", ah->handle, dctn,
	     (unsigned long long)key);
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	logline("wr_set_sge lkey=%#x addr=%#llx len=%u", lkey,
	     (unsigned long long)addr, length);
	dc_of(qpx)->len = length;
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n,
			    const struct ibv_sge *sge)
{
	uint32_t len = 0;
	size_t i;

	for (i = 0; i < n; i++)
		len += sge[i].length;
	logline("wr_set_sge_list n=%zu len=%u", n, len);
	dc_of(qpx)->len = len;
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct fake_dc *d = dc_of(qpx);
	struct ibv_wc wc = { 0 };

	logline("wr_complete rc=%d", complete_rc);
	d->open = 0;
	if (complete_rc)
		return complete_rc;
	if (qpx->wr_flags & IBV_SEND_SIGNALED) {
		wc.wr_id = qpx->wr_id;
		wc.opcode = d->opcode;
		wc.byte_len = d->len;
		wc.qp_num = qpx->qp_base.qp_num;
		fake_push_wc(qpx->qp_base.send_cq, &wc);
	}
	return 0;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	logline("wr_abort");
	dc_of(qpx)->open = 0;
}

struct ibv_qp *mlx5dv_create_qp(struct ibv_context *ctx,
				struct ibv_qp_init_attr_ex *a,
				struct mlx5dv_qp_init_attr *dv)
{
	struct ibv_qp *qp;
	struct fake_dc *d;
	int dct;

	(void)ctx;
	logline("mlx5dv_create_qp qp_type=%d comp_mask=%#x pd=%s send_cq=%s recv_cq=%s same_cq=%d srq=%s send_wr=%u recv_wr=%u send_sge=%u recv_sge=%u inline=%u sq_sig_all=%d create_flags=%#x send_ops=%#llx dv_comp_mask=%#llx dv_create_flags=%#x dc_type=%d dct_access_key=%#llx dv_send_ops=%#llx",
	     a->qp_type, a->comp_mask, a->pd ? "set" : "null",
	     a->send_cq ? "set" : "null", a->recv_cq ? "set" : "null",
	     a->send_cq == a->recv_cq, a->srq ? "set" : "null",
	     a->cap.max_send_wr, a->cap.max_recv_wr, a->cap.max_send_sge,
	     a->cap.max_recv_sge, a->cap.max_inline_data, a->sq_sig_all,
	     a->create_flags, (unsigned long long)a->send_ops_flags,
	     (unsigned long long)dv->comp_mask, dv->create_flags,
	     dv->dc_init_attr.dc_type,
	     (unsigned long long)dv->dc_init_attr.dct_access_key,
	     (unsigned long long)dv->send_ops_flags);
	if (a->qp_type != IBV_QPT_DRIVER ||
	    !(dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC) ||
	    !(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd) {
		errno = EINVAL;
		return NULL;
	}
	dct = dv->dc_init_attr.dc_type == MLX5DV_DCTYPE_DCT;
	if (dct && !a->srq) {
		errno = EINVAL;
		return NULL;
	}
	qp = fake_new_qp(a->pd, a->send_cq, a->recv_cq, a->srq, a->qp_type,
			 !dct);
	if (!qp)
		return NULL;
	if (!dct) {
		struct ibv_qp_ex *qpx = (struct ibv_qp_ex *)qp;

		d = fake_qp_driver(qp);
		memset(d, 0, sizeof(*d));
		d->qpx = qpx;
		d->mqpx.wr_set_dc_addr = wr_set_dc_addr;
		qpx->wr_start = wr_start;
		qpx->wr_rdma_write = wr_rdma_write;
		qpx->wr_rdma_read = wr_rdma_read;
		qpx->wr_set_sge = wr_set_sge;
		qpx->wr_set_sge_list = wr_set_sge_list;
		qpx->wr_complete = wr_complete;
		qpx->wr_abort = wr_abort;
	}
	return qp;
}

struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qpx)
{
	return &dc_of(qpx)->mqpx;
}
