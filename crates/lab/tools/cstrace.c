/* SPDX-License-Identifier: GPL-2.0-or-later
 *
 * cstrace: a Valgrind tool that writes the memory trace of lackey's --trace-mem=yes,
 * byte for byte, from a given instruction of a run on, reaching it at Valgrind's
 * translated speed instead of lackey's printing speed.
 *
 * cachesched's recordings (crates/lab/src/traces.rs) keep a window of a run: they
 * skip billions of instructions and keep 200 million. Lackey prints every event of the
 * skip too (about a million instructions a second here); this tool only counts the
 * skipped instructions, with a few IR operations per superblock, and prints from the
 * window's first instruction on, into a buffer of its own written a megabyte at a
 * time. Linked against Valgrind's core (libcoregrind), it is GPL like the core; it is
 * compiled on the user's machine by `cachesched` (crates/lab/src/tracer.rs), not
 * shipped as a binary.
 *
 * Options:
 *   --cs-fd=N                 write the trace on descriptor N (moved out of the
 *                             client's reach at start, as --log-fd is)
 *   --cs-skip=N               instructions to count before the first one printed
 *   --cs-counting=retired|events
 *                             retired (default): an instruction at the address of the
 *                             one executed just before it is not counted (each
 *                             iteration of a rep-prefixed string instruction after its
 *                             first), as the processor's counter and exp-bbv count;
 *                             events: every instruction execution lackey reports.
 *
 * The first line printed is that of the instruction that, counted, makes the count
 * exceed the skip; every event after it is printed, as lackey prints it:
 * "I  addr,size", " L addr,size", " S addr,size", " M addr,size" (a load and a store
 * of the same size to the same address within one instruction, unguarded, with no
 * side exit between them), addresses in at least 8 lower-case hexadecimal digits.
 * Lackey calls its helpers where it flushes its list of pending events (when a fifth
 * event comes to its list of four, at each side exit, after a load-linked and at the
 * superblock's end); this tool flushes at the same points, and stores the count there
 * too, so an instruction whose superblock is left by a fault loses the events lackey
 * loses and is not counted, as the reader of lackey's lines would not count it. The
 * buffer is written out before a fork (so a child does not write the parent's lines
 * again) and before an exec (whose new program is not traced).
 */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_options.h"
#include "pub_tool_machine.h"
#include "pub_tool_vkiscnums.h"

/* The core's own: moves a descriptor into the range Valgrind keeps from the client. */
extern Int VG_(safe_fd)(Int oldfd);

static Long clo_fd = -1;
static Long clo_skip = 0;
static Bool clo_retired = True;

/* Instructions counted so far, and the address of the last one executed (retired
 * counting), both stored by the instrumented code at each superblock's exits. */
static ULong counted = 0;
static ULong last_ip = ~0ULL;

/* ---------------------------------------------------------------- output */

#define OUT_BYTES (1 << 20)
#define OUT_SLACK 64 /* the longest line: 3 + 16 + 1 + 20 + 1 */
static HChar out[OUT_BYTES];
static Int out_used = 0;
static Int out_fd = -1;

static void out_flush(void)
{
   Int done = 0;
   while (done < out_used) {
      Int n = VG_(write)(out_fd, out + done, out_used - done);
      if (n <= 0) {
         /* the reader is gone (it has its window, or it was stopped): end the run */
         VG_(exit)(0);
      }
      done += n;
   }
   out_used = 0;
}

static const HChar hexdig[16] = "0123456789abcdef";

static inline void put(HChar a, HChar b, Addr addr, SizeT size)
{
   HChar tmp[20];
   Int n = 0, i;
   HChar* p;
   if (out_used > OUT_BYTES - OUT_SLACK)
      out_flush();
   p = out + out_used;
   *p++ = a;
   *p++ = b;
   *p++ = ' ';
   /* %08lx */
   do {
      tmp[n++] = hexdig[addr & 15];
      addr >>= 4;
   } while (addr != 0);
   for (i = n; i < 8; i++)
      *p++ = '0';
   while (n > 0)
      *p++ = tmp[--n];
   *p++ = ',';
   /* %lu */
   do {
      tmp[n++] = (HChar)('0' + size % 10);
      size /= 10;
   } while (size != 0);
   while (n > 0)
      *p++ = tmp[--n];
   *p++ = '\n';
   out_used = (Int)(p - out);
}

static VG_REGPARM(2) void ev_instr(Addr a, SizeT n) { put('I', ' ', a, n); }
static VG_REGPARM(2) void ev_load(Addr a, SizeT n) { put(' ', 'L', a, n); }
static VG_REGPARM(2) void ev_store(Addr a, SizeT n) { put(' ', 'S', a, n); }
static VG_REGPARM(2) void ev_modify(Addr a, SizeT n) { put(' ', 'M', a, n); }

/* ---------------------------------------------------------------- instrumentation */

typedef enum { EvI, EvL, EvS, EvM } EvKind;

/* An event waiting for its helper call: what lackey keeps in its list between
 * flushes. `guard` is the event's own (guarded loads and stores), `when` the
 * instruction's: whether the count has passed the skip at that instruction. */
typedef struct {
   EvKind  kind;
   IRExpr* addr;
   Int     size;
   IRExpr* guard;
   IRExpr* when;
} Ev;

/* lackey's list: four events, flushed when a fifth comes */
#define MAX_EVS 4
static Ev evs[MAX_EVS];
static Int n_evs;

/* Per superblock: the count after its first instruction (a temporary), how many
 * instructions counted since it, the address of the current instruction, and its
 * guard. */
static IRTemp first_count;
static ULong  since_first;
static Addr   cur_ip;
static Bool   have_ip;
static IRExpr* cur_when;

static void store_count(IRSB* sb);

/* Emits the helper calls of the pending events, then stores the count and the last
 * instruction's address: the instructions whose lines are printed are the ones
 * counted, as lackey's reader counts them. */
static void flush_evs(IRSB* sb)
{
   Int i;
   for (i = 0; i < n_evs; i++) {
      Ev* e = &evs[i];
      const HChar* name;
      void* fn;
      IRDirty* di;
      IRExpr* g;
      switch (e->kind) {
         case EvI: name = "ev_instr"; fn = ev_instr; break;
         case EvL: name = "ev_load"; fn = ev_load; break;
         case EvS: name = "ev_store"; fn = ev_store; break;
         default: name = "ev_modify"; fn = ev_modify; break;
      }
      di = unsafeIRDirty_0_N(2, name, VG_(fnptr_to_fnentry)(fn),
                             mkIRExprVec_2(e->addr, mkIRExpr_HWord((HWord)e->size)));
      if (e->guard) {
         IRTemp t = newIRTemp(sb->tyenv, Ity_I1);
         addStmtToIRSB(sb, IRStmt_WrTmp(t, IRExpr_Binop(Iop_And1, e->when, e->guard)));
         g = IRExpr_RdTmp(t);
      } else {
         g = e->when;
      }
      di->guard = g;
      addStmtToIRSB(sb, IRStmt_Dirty(di));
   }
   if (n_evs > 0)
      store_count(sb);
   n_evs = 0;
}

static void add_ev(IRSB* sb, EvKind k, IRExpr* addr, Int size, IRExpr* guard)
{
   if (n_evs == MAX_EVS)
      flush_evs(sb);
   evs[n_evs].kind = k;
   evs[n_evs].addr = addr;
   evs[n_evs].size = size;
   evs[n_evs].guard = guard;
   evs[n_evs].when = cur_when;
   n_evs++;
}

/* A store: merged into the load just before it, if that is an unguarded load of the
 * same size from the same address with no flush between (lackey's rule). */
static void add_store(IRSB* sb, IRExpr* addr, Int size)
{
   if (n_evs > 0) {
      Ev* last = &evs[n_evs - 1];
      if (last->kind == EvL && last->size == size && last->guard == NULL
          && eqIRAtom(last->addr, addr)) {
         last->kind = EvM;
         return;
      }
   }
   add_ev(sb, EvS, addr, size, NULL);
}

/* The count after the current instruction, as an expression. */
static IRExpr* count_now(void)
{
   return IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(first_count), IRExpr_Const(IRConst_U64(since_first)));
}

/* Stores the count and the last instruction's address: before each exit and at the
 * end, so the next superblock starts from them. */
static void store_count(IRSB* sb)
{
   IRTemp t;
   if (!have_ip)
      return;
   t = newIRTemp(sb->tyenv, Ity_I64);
   addStmtToIRSB(sb, IRStmt_WrTmp(t, count_now()));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, mkIRExpr_HWord((HWord)&counted), IRExpr_RdTmp(t)));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, mkIRExpr_HWord((HWord)&last_ip),
                                  IRExpr_Const(IRConst_U64((ULong)cur_ip))));
}

static void on_imark(IRSB* sb, Addr ip, UInt len)
{
   IRTemp w;
   IRTemp c;
   if (!have_ip) {
      /* the first instruction: counts unless it repeats the last one executed */
      IRTemp c0 = newIRTemp(sb->tyenv, Ity_I64);
      addStmtToIRSB(sb, IRStmt_WrTmp(c0, IRExpr_Load(Iend_LE, Ity_I64, mkIRExpr_HWord((HWord)&counted))));
      first_count = newIRTemp(sb->tyenv, Ity_I64);
      if (clo_retired) {
         IRTemp l = newIRTemp(sb->tyenv, Ity_I64);
         IRTemp ne = newIRTemp(sb->tyenv, Ity_I1);
         addStmtToIRSB(sb, IRStmt_WrTmp(l, IRExpr_Load(Iend_LE, Ity_I64, mkIRExpr_HWord((HWord)&last_ip))));
         addStmtToIRSB(sb, IRStmt_WrTmp(ne, IRExpr_Binop(Iop_CmpNE64, IRExpr_RdTmp(l),
                                                         IRExpr_Const(IRConst_U64((ULong)ip)))));
         IRTemp one = newIRTemp(sb->tyenv, Ity_I64);
         addStmtToIRSB(sb, IRStmt_WrTmp(one, IRExpr_Unop(Iop_1Uto64, IRExpr_RdTmp(ne))));
         addStmtToIRSB(sb, IRStmt_WrTmp(first_count,
                                        IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(c0), IRExpr_RdTmp(one))));
      } else {
         addStmtToIRSB(sb, IRStmt_WrTmp(first_count,
                                        IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(c0),
                                                     IRExpr_Const(IRConst_U64(1)))));
      }
      since_first = 0;
      have_ip = True;
   } else {
      /* a full list is flushed before this instruction's event joins it, with the
       * count of the instructions before it (lackey prints those lines first) */
      if (n_evs == MAX_EVS)
         flush_evs(sb);
      if (!(clo_retired && ip == cur_ip))
         since_first++;
   }
   cur_ip = ip;
   /* whether this instruction is past the skip: skip < count */
   c = newIRTemp(sb->tyenv, Ity_I64);
   addStmtToIRSB(sb, IRStmt_WrTmp(c, count_now()));
   w = newIRTemp(sb->tyenv, Ity_I1);
   addStmtToIRSB(sb, IRStmt_WrTmp(w, IRExpr_Binop(Iop_CmpLT64U,
                                                  IRExpr_Const(IRConst_U64((ULong)clo_skip)),
                                                  IRExpr_RdTmp(c))));
   cur_when = IRExpr_RdTmp(w);
   add_ev(sb, EvI, mkIRExpr_HWord((HWord)ip), (Int)len, NULL);
}

static IRSB* cs_instrument(VgCallbackClosure* closure, IRSB* in, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   IRSB* sb;
   Int i;
   IRTypeEnv* tyenv = in->tyenv;

   if (gWordTy != Ity_I64 || hWordTy != Ity_I64)
      VG_(tool_panic)("cstrace: only 64-bit guests and hosts");

   sb = deepCopyIRSBExceptStmts(in);
   i = 0;
   while (i < in->stmts_used && in->stmts[i]->tag != Ist_IMark) {
      addStmtToIRSB(sb, in->stmts[i]);
      i++;
   }
   n_evs = 0;
   have_ip = False;
   cur_when = NULL;

   for (; i < in->stmts_used; i++) {
      IRStmt* st = in->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      switch (st->tag) {
         case Ist_AbiHint:
         case Ist_Put:
         case Ist_PutI:
         case Ist_MBE:
            addStmtToIRSB(sb, st);
            break;
         case Ist_IMark:
            on_imark(sb, st->Ist.IMark.addr + st->Ist.IMark.delta, st->Ist.IMark.len);
            addStmtToIRSB(sb, st);
            break;
         case Ist_WrTmp: {
            IRExpr* d = st->Ist.WrTmp.data;
            if (d->tag == Iex_Load)
               add_ev(sb, EvL, d->Iex.Load.addr, sizeofIRType(d->Iex.Load.ty), NULL);
            addStmtToIRSB(sb, st);
            break;
         }
         case Ist_Store:
            add_store(sb, st->Ist.Store.addr, sizeofIRType(typeOfIRExpr(tyenv, st->Ist.Store.data)));
            addStmtToIRSB(sb, st);
            break;
         case Ist_StoreG: {
            IRStoreG* sg = st->Ist.StoreG.details;
            add_ev(sb, EvS, sg->addr, sizeofIRType(typeOfIRExpr(tyenv, sg->data)), sg->guard);
            addStmtToIRSB(sb, st);
            break;
         }
         case Ist_LoadG: {
            IRLoadG* lg = st->Ist.LoadG.details;
            IRType ty = Ity_INVALID, wide = Ity_INVALID;
            typeOfIRLoadGOp(lg->cvt, &wide, &ty);
            add_ev(sb, EvL, lg->addr, sizeofIRType(ty), lg->guard);
            addStmtToIRSB(sb, st);
            break;
         }
         case Ist_Dirty: {
            IRDirty* d = st->Ist.Dirty.details;
            if (d->mFx != Ifx_None) {
               if (d->mFx == Ifx_Read || d->mFx == Ifx_Modify)
                  add_ev(sb, EvL, d->mAddr, d->mSize, NULL);
               if (d->mFx == Ifx_Write || d->mFx == Ifx_Modify)
                  add_store(sb, d->mAddr, d->mSize);
            }
            addStmtToIRSB(sb, st);
            break;
         }
         case Ist_CAS: {
            IRCAS* cas = st->Ist.CAS.details;
            Int size = sizeofIRType(typeOfIRExpr(tyenv, cas->dataLo));
            if (cas->dataHi != NULL)
               size *= 2;
            add_ev(sb, EvL, cas->addr, size, NULL);
            add_store(sb, cas->addr, size);
            addStmtToIRSB(sb, st);
            break;
         }
         case Ist_LLSC:
            if (st->Ist.LLSC.storedata == NULL) {
               add_ev(sb, EvL, st->Ist.LLSC.addr, sizeofIRType(typeOfIRTemp(tyenv, st->Ist.LLSC.result)), NULL);
               flush_evs(sb);
            } else {
               add_store(sb, st->Ist.LLSC.addr, sizeofIRType(typeOfIRExpr(tyenv, st->Ist.LLSC.storedata)));
            }
            addStmtToIRSB(sb, st);
            break;
         case Ist_Exit:
            flush_evs(sb);
            addStmtToIRSB(sb, st);
            break;
         default:
            ppIRStmt(st);
            VG_(tool_panic)("cstrace: unhandled IR statement");
      }
   }
   flush_evs(sb);
   return sb;
}

/* ---------------------------------------------------------------- the tool */

static Bool cs_option(const HChar* arg)
{
   const HChar* s;
   if VG_INT_CLO(arg, "--cs-fd", clo_fd) {}
   else if VG_INT_CLO(arg, "--cs-skip", clo_skip) {}
   else if VG_STR_CLO(arg, "--cs-counting", s) {
      if (VG_(strcmp)(s, "retired") == 0)
         clo_retired = True;
      else if (VG_(strcmp)(s, "events") == 0)
         clo_retired = False;
      else
         VG_(fmsg_bad_option)(arg, "expected retired or events\n");
   }
   else
      return False;
   return True;
}

static void cs_usage(void)
{
   VG_(printf)("    --cs-fd=N                 write the trace on descriptor N\n"
               "    --cs-skip=N               instructions counted before the first printed [0]\n"
               "    --cs-counting=retired|events  how they are counted [retired]\n");
}

static void cs_debug_usage(void) {}

static void cs_pre_fork(ThreadId tid);

static void cs_post_clo_init(void)
{
   if (clo_fd < 0)
      VG_(fmsg_bad_option)("--cs-fd", "a descriptor to write the trace on is required\n");
   if (clo_skip < 0)
      VG_(fmsg_bad_option)("--cs-skip", "must not be negative\n");
   out_fd = VG_(safe_fd)((Int)clo_fd);
   if (out_fd < 0)
      VG_(fmsg_bad_option)("--cs-fd", "cannot use this descriptor\n");
   VG_(atfork)(cs_pre_fork, NULL, NULL);
}

static void cs_fini(Int exitcode)
{
   out_flush();
}

/* Before a fork: the child must not write the parent's pending lines again. */
static void cs_pre_fork(ThreadId tid)
{
   out_flush();
}

/* Before an exec: the new program runs untraced, and would drop the pending lines. */
static void cs_pre_syscall(ThreadId tid, UInt no, UWord* args, UInt n)
{
   if (no == __NR_execve || no == __NR_execveat)
      out_flush();
}

static void cs_post_syscall(ThreadId tid, UInt no, UWord* args, UInt n, SysRes res) {}

static void cs_pre_clo_init(void)
{
   VG_(details_name)("cstrace");
   VG_(details_version)("1");
   VG_(details_description)("lackey's memory trace from a given instruction on (cachesched)");
   VG_(details_copyright_author)("cachesched; GNU GPL v2 or later");
   VG_(details_bug_reports_to)("the cachesched project");
   VG_(details_avg_translation_sizeB)(400);
   VG_(basic_tool_funcs)(cs_post_clo_init, cs_instrument, cs_fini);
   VG_(needs_command_line_options)(cs_option, cs_usage, cs_debug_usage);
   VG_(needs_syscall_wrapper)(cs_pre_syscall, cs_post_syscall);
}

VG_DETERMINE_INTERFACE_VERSION(cs_pre_clo_init)
