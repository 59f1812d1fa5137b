/*
 * Open-reply flags that pyfuse3 cannot express: ``noflush`` and ``cache_readdir``.
 *
 * pyfuse3's FileInfo carries fh, keep_cache, direct_io and nonseekable only,
 * and its opendir reply carries just the handle.  libfuse's fuse_file_info has
 * two more bits that matter for a read-mostly mount:
 *
 *   noflush        the kernel skips FLUSH on close(2): one round trip less per
 *                  open/read/close of a file opened read-only;
 *   cache_readdir  the kernel keeps a directory's entries in its page cache and
 *                  answers getdents(2) from there until the inode is invalidated.
 *
 * This module defines ``fuse_reply_open``.  Loaded with RTLD_GLOBAL before
 * pyfuse3 (lakemount/fuse/kflags.py), it is the definition pyfuse3's extension
 * binds to; it reads two request bits that lakemount's adapter puts in the
 * handle number, sets the matching libfuse bits, and calls libfuse's own
 * ``fuse_reply_open``.  The handle number reaches the kernel unchanged (the
 * adapter masks the bits off every handle it is given back).
 *
 * It also defines ``fuse_session_new`` (wrapping the FLUSH handler, to note the
 * closing thread, and the GETXATTR handler, to answer security.* names in C) and
 * ``fuse_session_mount`` (to add FUSE_HANDLE_KILLPRIV_V2 to the INIT reply); see
 * lakemount/fuse/kflags.py.
 *
 * Stop 52 (issue 36): a fast path past pyfuse3's request loop.  pyfuse3 answers every request in a trio task
 * (a lock, a wait for the fd through the scheduler, a coroutine per request); for a small file's LOOKUP,
 * CREATE, WRITE, FLUSH and RELEASE the core usually needs no I/O at all.  With an object registered by the
 * adapter (set_fast), this module's wrappers of those five handlers call its fast_* method synchronously, on
 * the loop thread with the GIL held as pyfuse3's handlers are, with plain arguments; the method answers from
 * memory (under the core's nonblocking(), which raises NeedsThread before changing anything) and returns what
 * is replied here (an entry, a create's entry and open flags, a write's count, 0, or -errno), or None: then
 * pyfuse3's own handler takes the request as before.  After a request answered here (these five, a kept
 * GETATTR, a security.* GETXATTR) the wrapper drains: while the session fd has a request waiting (poll with
 * timeout 0), at most DRAIN_MOST times, it reads it into a buffer of its own and hands it to libfuse's
 * fuse_session_process_buf, which dispatches it to the wrapped table again.  A request that reaches a pyfuse3
 * handler (any op not answered here) stored a coroutine that pyfuse3's loop must await as soon as the outer
 * process_buf returns: the drain stops at once then, as it does on a read that fails or ends the session
 * (libfuse sets the session's exit flag on ENODEV; pyfuse3's loop sees it).  Reads in the drain go through
 * io_read like pyfuse3's, so the kept-attribute drops and the INIT bookkeeping see every request.
 *
 * Stop 54 (issue 36): FUSE passthrough.  With want_passthrough(True) before the mount, the INIT reply asks for it
 * (FUSE_INIT_EXT, FUSE_PASSTHROUGH, max_stack_depth); backing_open/backing_close register and drop a backing file on
 * the session fd; an open or create reply of a handle registered with pass_through(fh, id) goes out with
 * FOPEN_PASSTHROUGH and that id (io_writev writes them into the fuse_open_out, which libfuse 3.14 sends with the id's
 * field as padding).  See lakemount/fuse/passthrough.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define FUSE_USE_VERSION 35
#include <dlfcn.h>
#include <errno.h>
#include <fuse3/fuse_lowlevel.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* Keep in sync with lakemount/fuse/kflags.py. */
#define FH_NOFLUSH (UINT64_C(1) << 62)
#define FH_CACHE_DIR (UINT64_C(1) << 61)

typedef int (*reply_open_fn)(fuse_req_t, const struct fuse_file_info *);
typedef struct fuse_session *(*session_new_fn)(struct fuse_args *, const struct fuse_lowlevel_ops *, size_t, void *);
typedef void (*flush_fn)(fuse_req_t, fuse_ino_t, struct fuse_file_info *);

typedef const struct fuse_ctx *(*req_ctx_fn)(fuse_req_t);
typedef void (*getxattr_fn)(fuse_req_t, fuse_ino_t, const char *, size_t);
typedef int (*reply_err_fn)(fuse_req_t, int);
typedef int (*session_mount_fn)(struct fuse_session *, const char *);
typedef int (*session_fd_fn)(struct fuse_session *);
typedef int (*custom_io_fn)(struct fuse_session *, const struct fuse_custom_io *, int);
typedef void (*getattr_fn)(fuse_req_t, fuse_ino_t, struct fuse_file_info *);
typedef int (*reply_attr_fn)(fuse_req_t, const struct stat *, double);
typedef void (*lookup_fn)(fuse_req_t, fuse_ino_t, const char *);
typedef void (*create_fn)(fuse_req_t, fuse_ino_t, const char *, mode_t, struct fuse_file_info *);
typedef void (*write_buf_fn)(fuse_req_t, fuse_ino_t, struct fuse_bufvec *, off_t, struct fuse_file_info *);
typedef void (*release_fn)(fuse_req_t, fuse_ino_t, struct fuse_file_info *);
typedef int (*reply_entry_fn)(fuse_req_t, const struct fuse_entry_param *);
typedef int (*reply_create_fn)(fuse_req_t, const struct fuse_entry_param *, const struct fuse_file_info *);
typedef int (*reply_write_fn)(fuse_req_t, size_t);
typedef int (*receive_buf_fn)(struct fuse_session *, struct fuse_buf *);
typedef void (*process_buf_fn)(struct fuse_session *, const struct fuse_buf *);
typedef int (*session_exited_fn)(struct fuse_session *);
typedef void (*session_destroy_fn)(struct fuse_session *);

static reply_open_fn real_reply_open = NULL;
static req_ctx_fn real_req_ctx = NULL; /* this module links no libfuse: its functions are looked up at load */
static session_new_fn real_session_new = NULL;
static flush_fn pyfuse3_flush = NULL;
static getxattr_fn pyfuse3_getxattr = NULL;
static reply_err_fn real_reply_err = NULL;
static unsigned long long answered_getxattrs = 0; /* answered here, never reaching Python */
static session_mount_fn real_session_mount = NULL;
static session_fd_fn real_session_fd = NULL;
static custom_io_fn real_custom_io = NULL;
static getattr_fn pyfuse3_getattr = NULL;
static reply_attr_fn real_reply_attr = NULL;
static int io_hooked = 0; /* the session's reads pass through io_read (which drops the kept attributes) */
static unsigned long long requests_read = 0; /* requests read from /dev/fuse so far */
static unsigned long long drops = 0; /* times every kept attribute was dropped (a request that may change a directory
                                      * read, or a drop from Python): keep_attr refuses attributes computed before one */
static unsigned long long answered_getattrs = 0; /* answered here from kept attributes, never reaching Python */

/* The fast path (stop 52): pyfuse3's handlers it wraps, libfuse's functions it calls, the adapter's methods. */
static lookup_fn pyfuse3_lookup = NULL;
static create_fn pyfuse3_create = NULL;
static write_buf_fn pyfuse3_write_buf = NULL;
static release_fn pyfuse3_release = NULL;
static reply_entry_fn real_reply_entry = NULL;
static reply_create_fn real_reply_create = NULL;
static reply_write_fn real_reply_write = NULL;
static receive_buf_fn real_receive_buf = NULL;
static process_buf_fn real_process_buf = NULL;
static session_exited_fn real_session_exited = NULL;
static session_destroy_fn real_session_destroy = NULL;
static struct fuse_session *session = NULL; /* the session made through fuse_session_new (one per process) */
enum { F_LOOKUP, F_CREATE, F_WRITE, F_FLUSH, F_RELEASE, F_OPS };
static const char *const fast_names[F_OPS] = {"fast_lookup", "fast_create", "fast_write", "fast_flush", "fast_release"};
static PyObject *fast[F_OPS]; /* the registered object's bound methods; NULL: that op goes to pyfuse3 */
static unsigned long long fast_answered[F_OPS]; /* answered here from the method's result */
static unsigned long long fast_declined[F_OPS]; /* the method said "needs a thread": pyfuse3's handler took it */
static unsigned long long fast_failed = 0; /* the method raised or answered nonsense: EIO (a bug, logged) */
/* Stop 53: a FLUSH the fast method gave back (its save needs a thread) is handed to the registered object's
 * hand_flush(req, fh, closer), which runs it in a thread of its own that replies through reply(): pyfuse3's loop
 * neither awaits it nor is woken to reply (trio's thread hop cost ~110 us of CPU a close). */
static PyObject *hand_flush = NULL;
static unsigned long long handed_flushes = 0; /* flushes taken by hand_flush */
static unsigned long long handed_unanswered = 0; /* handed requests dropped without a reply: answered EIO (a bug) */
#define DRAIN_MOST 64 /* requests read by one drain at most, so the loop's other tasks run between drains */
static int drain_on = 0;
static int draining = 0; /* inside a drain: a request answered here does not start another */
static int answered_here = 0; /* the request just dispatched was answered in this module (no coroutine stored) */
static unsigned long long drains = 0; /* drains that read at least one request */
static unsigned long long drained = 0; /* requests read and dispatched by drains */
static unsigned long long drained_to_python = 0; /* of them, those that went to a pyfuse3 handler (ending a drain) */
static struct fuse_buf drain_buf; /* the drain's own read buffer (allocated by libfuse on first use) */
/* Stop 57: when the drain finds no request waiting it waits for the next one in ppoll up to drain_wait_ns, keeping
 * the GIL (the writer's next syscall usually comes within tens of microseconds of its reply; without the wait each
 * request went back through trio's epoll and pyfuse3's task, ~50 us of CPU each).  Only while no request is being
 * answered by another thread: in_threads counts the FLUSHes handed to hand_flush not yet answered and the adapter's
 * threads running a request's core call (threads_out), each of which needs the GIL, and a thread pyfuse3 awaits
 * also needs trio's loop; they can only start on this (the loop's) thread, so none starts during a wait. */
static long drain_wait_ns = 300000;
static long in_threads = 0; /* changed and read with the GIL held */
static unsigned long long drain_waits = 0; /* waits in ppoll */
static unsigned long long drain_waited = 0; /* of them, those a request ended (it was read and dispatched) */
static unsigned long long drain_waits_skipped = 0; /* drains that found nothing and did not wait: a thread's request */

/* A directory's attributes kept by the adapter right after a create in it (the kernel drops them at every
 * create and asks again before the next name's permission check): the next GETATTR of that inode is answered
 * here, once, within a second (or the attributes' timeout, if shorter).  Every request read that may change
 * a directory's attributes drops them all (io_read). */
#define KEPT 8
#define KEEP_FOR_S 1.0 /* kept at most this long, whatever the timeout the kernel is given with them */
static struct {
    uint64_t ino;
    uid_t uid; /* the creator's: a GETATTR from anyone else goes to Python (a shared mount's access check) */
    struct stat st;
    double timeout;
    struct timespec until;
    int used;
} kept[KEPT];
static int kept_next = 0;

static void drop_kept(void) {
    drops++;
    for (int i = 0; i < KEPT; i++)
        kept[i].used = 0;
}

static int before(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* FUSE_HANDLE_KILLPRIV_V2, which libfuse 3.14 cannot ask for: the INIT request's unique id while its reply
 * is due (0: none), whether the kernel offered the flag, and whether the reply took it. */
static uint64_t init_unique = 0;
static int killpriv_offered = 0;
static int killpriv_granted = 0;
static struct fuse_lowlevel_ops wrapped_ops;

/* FUSE passthrough (Linux 6.9, protocol 7.40; stop 54), which the installed headers (6.1) and libfuse 3.14 predate:
 * the constants and structs are the kernel's uapi fuse.h's.  The daemon registers a file it holds open (a backing
 * file) on the session fd and gets a backing id; an OPEN or CREATE answered with FOPEN_PASSTHROUGH and that id has
 * its reads, writes and mmap go to the backing file in the kernel, with no request to the daemon.  The INIT reply
 * must carry FUSE_INIT_EXT + FUSE_PASSTHROUGH and a max_stack_depth (the backing files' own file system stacking:
 * 1 admits plain ext4/xfs files, refused on overlayfs and the like with ELOOP at BACKING_OPEN). */
#define LM_FUSE_PASSTHROUGH2 (UINT32_C(1) << 5) /* FUSE_PASSTHROUGH (1ULL << 37), in flags2 */
#define LM_FOPEN_PASSTHROUGH (UINT32_C(1) << 7)
#define LM_MAX_STACK_DEPTH 1
struct lm_fuse_backing_map {
    int32_t fd;
    uint32_t flags;
    uint64_t padding;
};
#define LM_FUSE_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct lm_fuse_backing_map)
#define LM_FUSE_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)
struct lm_fuse_init_out { /* 7.40's: fuse_init_out with max_stack_depth where 6.1's has unused[0] */
    uint32_t major, minor, max_readahead, flags;
    uint16_t max_background, congestion_threshold;
    uint32_t max_write, time_gran;
    uint16_t max_pages, map_alignment;
    uint32_t flags2, max_stack_depth;
    uint32_t unused[6];
};
struct lm_fuse_open_out { /* 7.40's: fuse_open_out with backing_id where 6.1's has padding */
    uint64_t fh;
    uint32_t open_flags;
    int32_t backing_id;
};
static int passthrough_wanted = 0; /* set from Python before the mount: ask for passthrough in the INIT reply */
static int passthrough_offered = 0; /* the kernel's INIT offered FUSE_PASSTHROUGH */
static int passthrough_granted = 0; /* the INIT reply asked for it (the kernel takes it unless writeback cache) */
/* Open replies to send as passthrough: handle (as given to the kernel) -> backing id, registered by the adapter
 * just before its open or create returns, taken by the reply (fuse_reply_open / fuse_reply_create below), which
 * leaves the id in reply_backing for io_writev (called by libfuse on the same thread, inside the reply) to write
 * into the fuse_open_out it sends. */
#define PASSING 256
static struct {
    uint64_t fh;
    int32_t backing_id;
    int used;
} passing[PASSING];
static pthread_mutex_t passing_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int32_t reply_backing = 0; /* 0: none (backing ids start at 1) */
static unsigned long long passthrough_replies = 0; /* open/create replies sent with FOPEN_PASSTHROUGH */

static int passing_count = 0; /* entries in passing (read unlocked: a reply finds its own entry, registered before) */

static int32_t take_passing(uint64_t fh) {
    int32_t id = 0;
    if (__atomic_load_n(&passing_count, __ATOMIC_ACQUIRE) == 0)
        return 0;
    pthread_mutex_lock(&passing_lock);
    for (int i = 0; i < PASSING; i++) {
        if (passing[i].used && passing[i].fh == fh) {
            passing[i].used = 0;
            id = passing[i].backing_id;
            __atomic_sub_fetch(&passing_count, 1, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&passing_lock);
    return id;
}

/* Read and dispatch the requests already waiting on the session fd, after one answered here (see the header
 * comment).  Stops at DRAIN_MOST, when none is waiting, when a read fails or ends the session (EINTR, EAGAIN:
 * nothing to read now; ENODEV or an unmount: libfuse sets the exit flag, which pyfuse3's loop checks next), or
 * as soon as a request was not answered here: its pyfuse3 handler stored a coroutine (pyfuse3's py_retval)
 * that pyfuse3's loop awaits when the outer fuse_session_process_buf returns; one more request dispatched
 * would overwrite it. */
static void drain(void) {
    int fd = real_session_fd(session);
    int n = 0;
    draining = 1;
    while (n < DRAIN_MOST && !real_session_exited(session)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, 0);
        if (ready == 0 && drain_wait_ns > 0) {
            if (in_threads > 0) {
                drain_waits_skipped++;
            } else { /* the GIL stays held: no thread of this process runs Python meanwhile (see drain_wait_ns) */
                struct timespec wait = {.tv_sec = drain_wait_ns / 1000000000L, .tv_nsec = drain_wait_ns % 1000000000L};
                drain_waits++;
                ready = ppoll(&p, 1, &wait, NULL);
                if (ready == 1)
                    drain_waited++;
            }
        }
        if (ready != 1 || !(p.revents & POLLIN))
            break;
        drain_buf.flags = 0;
        drain_buf.pos = 0;
        if (real_receive_buf(session, &drain_buf) <= 0)
            break;
        n++;
        answered_here = 0;
        real_process_buf(session, &drain_buf);
        if (!answered_here) {
            drained_to_python++;
            break;
        }
    }
    draining = 0;
    if (n > 0) {
        drains++;
        drained += n;
    }
}

/* A request was answered in this module: note it (a drain goes on after it), and drain if not draining. */
static void answered_in_c(void) {
    answered_here = 1;
    if (drain_on && !draining && session != NULL)
        drain();
}

/* The adapter's method failed (a bug: the adapter maps every error of the core to an errno itself). */
static void fast_failure(fuse_req_t req, PyObject *callable) {
    fast_failed++;
    PyErr_WriteUnraisable(callable);
    real_reply_err(req, EIO);
}

/* r: what the fast method returned (a new reference, or NULL if it raised); op: which one.  0: it said None
 * (needs a thread, or not for the fast path): the caller hands the request to pyfuse3's handler.  1: answered
 * (an error reply for a negative int; else *value is set, a new reference, for the caller to reply with). */
static int take_result(fuse_req_t req, PyObject *r, int op, PyObject **value) {
    *value = NULL;
    if (r == NULL) {
        fast_failure(req, fast[op]);
        answered_in_c();
        return 1;
    }
    if (r == Py_None) {
        Py_DECREF(r);
        fast_declined[op]++;
        return 0;
    }
    if (PyLong_Check(r)) {
        long v = PyLong_AsLong(r);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(r);
            fast_failure(req, fast[op]);
            answered_in_c();
            return 1;
        }
        if (v < 0) {
            Py_DECREF(r);
            fast_answered[op]++;
            real_reply_err(req, (int)-v);
            answered_in_c();
            return 1;
        }
    }
    *value = r;
    return 1;
}

/* FLUSH and RELEASE: 0 (or a negative errno) replied as an error code. */
static int reply_status(fuse_req_t req, PyObject *r, int op) {
    PyObject *v;
    if (!take_result(req, r, op, &v))
        return 0;
    if (v != NULL) {
        long code = PyLong_Check(v) ? PyLong_AsLong(v) : -1;
        Py_DECREF(v);
        if (code != 0) {
            PyErr_SetString(PyExc_TypeError, "a fast flush or release answers 0, -errno or None");
            fast_failure(req, fast[op]);
        } else {
            fast_answered[op]++;
            real_reply_err(req, 0);
        }
        answered_in_c();
    }
    return 1;
}

static void set_ns(struct timespec *t, long long ns) { /* floor division, as pyfuse3's st_*time_ns setters */
    long long s = ns / 1000000000LL, r = ns % 1000000000LL;
    if (r < 0) {
        r += 1000000000LL;
        s--;
    }
    t->tv_sec = (time_t)s;
    t->tv_nsec = (long)r;
}

/* An entry from the adapter's tuple (ino, entry_timeout, attr_timeout, mode, nlink, uid, gid, rdev, size,
 * blksize, blocks, atime_ns, mtime_ns, ctime_ns[, fh, direct_io, keep_cache]), as pyfuse3's EntryAttributes
 * holds it (generation 0; inode 0 is a negative entry). */
static int parse_entry(PyObject *v, struct fuse_entry_param *e, struct fuse_file_info *fi) {
    unsigned long long ino, rdev, size, blocks, fh = 0;
    unsigned int mode, nlink, uid, gid;
    long blksize;
    long long atime, mtime, ctime;
    double entry_timeout, attr_timeout;
    int direct_io = 0, keep_cache = 0;
    if (!PyTuple_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "a fast lookup or create answers a tuple, -errno or None");
        return 0;
    }
    if (fi == NULL ? !PyArg_ParseTuple(v, "KddIIIIKKlKLLL", &ino, &entry_timeout, &attr_timeout, &mode, &nlink, &uid,
                                       &gid, &rdev, &size, &blksize, &blocks, &atime, &mtime, &ctime)
                   : !PyArg_ParseTuple(v, "KddIIIIKKlKLLLKpp", &ino, &entry_timeout, &attr_timeout, &mode, &nlink, &uid,
                                       &gid, &rdev, &size, &blksize, &blocks, &atime, &mtime, &ctime, &fh, &direct_io,
                                       &keep_cache))
        return 0;
    memset(e, 0, sizeof(*e));
    e->ino = ino;
    e->generation = 0;
    e->entry_timeout = entry_timeout;
    e->attr_timeout = attr_timeout;
    e->attr.st_ino = ino;
    e->attr.st_mode = mode;
    e->attr.st_nlink = nlink;
    e->attr.st_uid = uid;
    e->attr.st_gid = gid;
    e->attr.st_rdev = rdev;
    e->attr.st_size = size;
    e->attr.st_blksize = blksize;
    e->attr.st_blocks = blocks;
    set_ns(&e->attr.st_atim, atime);
    set_ns(&e->attr.st_mtim, mtime);
    set_ns(&e->attr.st_ctim, ctime);
    if (fi != NULL) { /* as pyfuse3's FileInfo._copy_to_fuse */
        fi->fh = fh;
        fi->direct_io = direct_io ? 1 : 0;
        fi->keep_cache = keep_cache ? 1 : 0;
        fi->nonseekable = 0;
    }
    return 1;
}

/* LOOKUP and CREATE: r, what the fast method returned, replied as an entry (fi == NULL: LOOKUP) or a create's
 * entry and open flags (fi: the request's, copied for the reply as pyfuse3 does, its fields set from r).  0: the
 * method said None, the caller hands the request to pyfuse3's handler; 1: answered here (an error for -errno, EIO
 * for a reply it could not parse), and drained. */
static int reply_entry(fuse_req_t req, PyObject *r, int op, const struct fuse_file_info *fi) {
    PyObject *v;
    if (!take_result(req, r, op, &v))
        return 0;
    if (v != NULL) {
        struct fuse_entry_param e;
        struct fuse_file_info out;
        if (fi != NULL)
            out = *fi;
        int ok = parse_entry(v, &e, fi != NULL ? &out : NULL);
        Py_DECREF(v);
        if (!ok) {
            fast_failure(req, fast[op]);
        } else {
            fast_answered[op]++;
            if (fi != NULL)
                fuse_reply_create(req, &e, &out);
            else
                real_reply_entry(req, &e);
        }
        answered_in_c();
    }
    return 1;
}

static void lookup_fast(fuse_req_t req, fuse_ino_t parent, const char *name) {
    if (fast[F_LOOKUP] != NULL) {
        const struct fuse_ctx *ctx = real_req_ctx(req);
        PyObject *r = PyObject_CallFunction(fast[F_LOOKUP], "Ky#III", (unsigned long long)parent, name,
                                            (Py_ssize_t)strlen(name), (unsigned)ctx->uid, (unsigned)ctx->gid,
                                            (unsigned)ctx->pid);
        if (reply_entry(req, r, F_LOOKUP, NULL))
            return;
    }
    pyfuse3_lookup(req, parent, name);
}

static void create_fast(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    if (fast[F_CREATE] != NULL) {
        const struct fuse_ctx *ctx = real_req_ctx(req);
        PyObject *r = PyObject_CallFunction(fast[F_CREATE], "Ky#IiIII", (unsigned long long)parent, name,
                                            (Py_ssize_t)strlen(name), (unsigned)mode, fi->flags, (unsigned)ctx->uid,
                                            (unsigned)ctx->gid, (unsigned)ctx->pid);
        if (reply_entry(req, r, F_CREATE, fi))
            return;
    }
    pyfuse3_create(req, parent, name, mode, fi);
}

/* Stop 57: appends written here (direct writes).  The adapter registers a handle whose file lives in a temp file (a
 * large file past its in-memory size and its MD5, written from its start: direct_write_register(fh, fd, end, sha)); a
 * WRITE of that handle at exactly ``end`` (the file's size) is pwritten from libfuse's buffer into the temp file here,
 * with the GIL released (no bytes object, no Python call), and answered; ``end``, the writes and bytes counted and the
 * time of the last one are kept for Python, which reads them (direct_write_state) where it needs the file's size,
 * version or mtime, and takes the registration back (direct_write_unregister) before it changes the file itself or
 * lets another write in.  Any other WRITE (an unregistered handle, an overwrite, a hole) goes to Python as before.
 * The lock orders a write here against a registration's end: once direct_write_unregister returned, no write of that
 * handle is under way here, and none starts.
 *
 * Stop 58: the file's SHA-256 is computed here too, by a thread of this module's own (hash_main) that never takes the
 * GIL: the registration hands it a Sha256 object (libcrypto's EVP context, below), which it feeds the temp file's
 * bytes from the start as they are written (through mmap, the pages the pwrite just filled), while Python leaves that
 * object alone; the unregistration waits until the thread is out of the file and says how far it hashed (Python hashes
 * on from there with the same object).  Stop 57's follower did this in Python and needed the GIL between every two
 * windows, which the request loop holds but for each pwrite: both ran about half the time (docs/SCALE.md, stop 58). */
#define DIRECT 64
static struct {
    uint64_t fh; /* as the adapter knows it: the kernel's handle without the FH_NOFLUSH/FH_CACHE_DIR bits */
    int fd;
    int used;
    int64_t end;            /* the file's size: the offset a write must be at to be written here */
    uint64_t writes, bytes; /* written here since the registration */
    int64_t mtime_ns;       /* CLOCK_REALTIME of the last write written here (0: none) */
    int64_t hashed;         /* bytes of the file hashed by hash_main (from 0): a write waits while end runs ahead */
    PyObject *sha;          /* the Sha256 object hash_main feeds (a reference held while registered) */
    int hashing;            /* hash_main is reading the file and feeding sha now (outside the lock) */
    int stop;               /* being unregistered: hash_main takes no more of it */
    int hash_err;           /* hash_main could not read the file (errno): it stops there, Python hashes on */
    void *map;              /* hash_main's mapping of the file's HASH_WINDOW at map_base (NULL: none) */
    int64_t map_base;
} direct[DIRECT];
static pthread_mutex_t direct_lock = PTHREAD_MUTEX_INITIALIZER;
/* Signalled (under direct_lock) after each write here, each step of the hash and each unregistration: a write waiting
 * for the hash to come within DIRECT_LAG of its file's end, hash_main waiting for bytes, an unregistration waiting for
 * hash_main to leave the file, and the follower waiting for the next FLUSH_STEP hashed (direct_write_wait). */
static pthread_cond_t direct_cond = PTHREAD_COND_INITIALIZER;
static unsigned long long direct_seq = 0; /* bumped each time a file's hash passes a multiple of FLUSH_STEP */
static unsigned long long direct_waits = 0; /* writes that waited for the hash to catch up */
/* How far a file's end may run ahead of its hash before the next write waits (at most DIRECT_WAIT_MOST_S each time):
 * what the old hash queue bounded (16 x 1 MiB).  Unbounded, the temp file's pages pile up unhashed, are not written
 * back or dropped (that waits for the hash, which reads them), the loop takes fresh pages, and a close waits for the
 * backlog's hash. */
#define DIRECT_LAG (INT64_C(16) << 20)
#define DIRECT_WAIT_MOST_S 2
#define HASH_STEP (INT64_C(4) << 20) /* bytes hash_main hashes at most per step (then looks at the others) */
#define HASH_WINDOW (INT64_C(16) << 20) /* the part of a file hash_main keeps mapped (aligned to it) */
#define FLUSH_STEP (INT64_C(16) << 20) /* writes.py's FLUSH_EVERY: the follower writes back and drops what is hashed */
static int direct_count = 0; /* registrations (read unlocked first: no registration, no lock taken per WRITE) */
static unsigned long long direct_writes = 0, direct_bytes = 0; /* answered here so far */
static unsigned long long direct_handed = 0; /* WRITEs of a registered handle not at its end: handed to Python */
static unsigned long long hash_steps = 0, hash_bytes = 0, hash_idle = 0; /* hash_main's steps, bytes, waits for bytes */
static int hash_started = 0;
#define FH_KEY(fh) ((uint64_t)(fh) & (FH_CACHE_DIR - 1))

/* libcrypto's digest calls, looked up at load (Python's _hashlib links the same library: no headers needed). */
typedef void *(*md_ctx_new_fn)(void);
typedef void (*md_ctx_free_fn)(void *);
typedef const void *(*md_fn)(void);
typedef int (*digest_init_fn)(void *, const void *, void *);
typedef int (*digest_update_fn)(void *, const void *, size_t);
typedef int (*digest_final_fn)(void *, unsigned char *, unsigned int *);
typedef int (*md_ctx_copy_fn)(void *, const void *);
static md_ctx_new_fn md_ctx_new = NULL;
static md_ctx_free_fn md_ctx_free = NULL;
static md_fn md_sha256 = NULL;
static digest_init_fn digest_init = NULL;
static digest_update_fn digest_update = NULL;
static digest_final_fn digest_final = NULL;
static md_ctx_copy_fn md_ctx_copy = NULL;

static void load_crypto(void) {
    void *lib = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        lib = dlopen("libcrypto.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return;
    md_ctx_new = (md_ctx_new_fn)dlsym(lib, "EVP_MD_CTX_new");
    md_ctx_free = (md_ctx_free_fn)dlsym(lib, "EVP_MD_CTX_free");
    md_sha256 = (md_fn)dlsym(lib, "EVP_sha256");
    digest_init = (digest_init_fn)dlsym(lib, "EVP_DigestInit_ex");
    digest_update = (digest_update_fn)dlsym(lib, "EVP_DigestUpdate");
    digest_final = (digest_final_fn)dlsym(lib, "EVP_DigestFinal_ex");
    md_ctx_copy = (md_ctx_copy_fn)dlsym(lib, "EVP_MD_CTX_copy_ex");
    if (!md_ctx_new || !md_ctx_free || !md_sha256 || !digest_init || !digest_update || !digest_final || !md_ctx_copy)
        md_ctx_new = NULL; /* not usable: no Sha256 type, no direct writes */
}

/* Sha256: a running SHA-256 (libcrypto's EVP context), fed by Python (update) or, while its file is registered for
 * direct writes, by hash_main only (``busy``: update and hexdigest refuse meanwhile). */
typedef struct {
    PyObject_HEAD void *ctx;
    int busy;
} Sha256Object;

static PyObject *sha256_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (!PyArg_ParseTuple(args, ":Sha256"))
        return NULL;
    Sha256Object *self = (Sha256Object *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->ctx = md_ctx_new();
    if (self->ctx == NULL || digest_init(self->ctx, md_sha256(), NULL) != 1) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void sha256_dealloc(Sha256Object *self) {
    if (self->ctx != NULL)
        md_ctx_free(self->ctx);
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static int sha256_free(Sha256Object *self) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "this SHA-256 is being fed by the shim's hash thread");
        return 0;
    }
    return 1;
}

static PyObject *sha256_update(Sha256Object *self, PyObject *arg) {
    Py_buffer view;
    if (!sha256_free(self) || PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int ok;
    if (view.len >= 65536) { /* as hashlib: other threads run while a large buffer is hashed */
        Py_BEGIN_ALLOW_THREADS
        ok = digest_update(self->ctx, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        ok = digest_update(self->ctx, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    if (ok != 1) {
        PyErr_SetString(PyExc_ValueError, "EVP_DigestUpdate failed");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *sha256_hexdigest(Sha256Object *self, PyObject *unused) {
    if (!sha256_free(self))
        return NULL;
    unsigned char md[32];
    unsigned int n = 0;
    void *copy = md_ctx_new();
    int ok = copy != NULL && md_ctx_copy(copy, self->ctx) == 1 && digest_final(copy, md, &n) == 1 && n == 32;
    if (copy != NULL)
        md_ctx_free(copy);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "EVP_DigestFinal_ex failed");
        return NULL;
    }
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return PyUnicode_FromStringAndSize(hex, 64);
}

static PyMethodDef sha256_methods[] = {
    {"update", (PyCFunction)sha256_update, METH_O, "Feed bytes (any buffer)."},
    {"hexdigest", (PyCFunction)sha256_hexdigest, METH_NOARGS, "The SHA-256 of the bytes fed so far, in hex."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot sha256_slots[] = {
    {Py_tp_new, sha256_new},
    {Py_tp_dealloc, sha256_dealloc},
    {Py_tp_methods, sha256_methods},
    {Py_tp_doc, "A running SHA-256 (libcrypto), which the shim's hash thread can feed without the GIL."},
    {0, NULL},
};

static PyType_Spec sha256_spec = {"lakemount.fuse._kflags.Sha256", sizeof(Sha256Object), 0, Py_TPFLAGS_DEFAULT,
                                  sha256_slots};
static PyTypeObject *sha256_type = NULL;

/* Hash bytes from..to of slot i's file into its Sha256 through its mapping of the HASH_WINDOW that holds them (mapped
 * once per window, faulted in as read: a mapping per step, or MAP_POPULATE, cost 0.73-0.78 s of CPU per GiB here
 * against 0.71 for whole windows and 0.69-0.71 for the same bytes in memory; pread into a buffer 0.78).  0, or an
 * errno.  Called by hash_main outside the lock with the slot's ``hashing`` set; only bytes no one cuts meanwhile (a
 * truncation below a mapped page is SIGBUS): Python truncates or closes the file only after the unregistration, which
 * waits for this.  A window's pages stay mapped until the next window (posix_fadvise's drop skips mapped pages): the
 * follower's next write-back drops them. */
static int hash_mapped(int i, int64_t from, int64_t to) {
    int64_t base = from - from % HASH_WINDOW;
    if (direct[i].map == NULL || direct[i].map_base != base) {
        if (direct[i].map != NULL)
            munmap(direct[i].map, (size_t)HASH_WINDOW);
        direct[i].map = mmap(NULL, (size_t)HASH_WINDOW, PROT_READ, MAP_SHARED, direct[i].fd, (off_t)base);
        if (direct[i].map == MAP_FAILED) {
            direct[i].map = NULL;
            return errno ? errno : EIO;
        }
        direct[i].map_base = base;
    }
    if (to > base + HASH_WINDOW)
        to = base + HASH_WINDOW;
    void *ctx = ((Sha256Object *)direct[i].sha)->ctx;
    return digest_update(ctx, (const char *)direct[i].map + (from - base), (size_t)(to - from)) == 1 ? 0 : EIO;
}

static void direct_unmap(int i) { /* under direct_lock, hash_main out of the slot */
    if (direct[i].map != NULL)
        munmap(direct[i].map, (size_t)HASH_WINDOW);
    direct[i].map = NULL;
}

/* The hash thread: feeds each registered file's Sha256 the bytes written here since, HASH_STEP at a time, in turn. */
static void *hash_main(void *unused) {
    int next = 0;
    pthread_mutex_lock(&direct_lock);
    for (;;) {
        int i = -1;
        for (int k = 0; k < DIRECT && i < 0; k++) {
            int j = (next + k) % DIRECT;
            if (direct[j].used && !direct[j].stop && !direct[j].hash_err && direct[j].hashed < direct[j].end)
                i = j;
        }
        if (i < 0) {
            hash_idle++;
            pthread_cond_wait(&direct_cond, &direct_lock);
            continue;
        }
        next = (i + 1) % DIRECT;
        int64_t from = direct[i].hashed, to = direct[i].end;
        if (to - from > HASH_STEP)
            to = from + HASH_STEP;
        if (to / HASH_WINDOW != from / HASH_WINDOW) /* one window at a time */
            to = (from / HASH_WINDOW + 1) * HASH_WINDOW;
        direct[i].hashing = 1;
        pthread_mutex_unlock(&direct_lock);
        int err = hash_mapped(i, from, to);
        pthread_mutex_lock(&direct_lock);
        direct[i].hashing = 0;
        if (err) {
            direct[i].hash_err = err;
        } else {
            direct[i].hashed = to;
            hash_steps++;
            hash_bytes += (unsigned long long)(to - from);
            if (to / FLUSH_STEP != from / FLUSH_STEP)
                direct_seq++; /* the follower writes back and drops what is hashed */
        }
        pthread_cond_broadcast(&direct_cond);
    }
    return NULL;
}

/* A child forked from the mount has no hash thread and no session: nothing of the parent's is written or hashed there
 * (a registration there starts a thread of its own). */
static void direct_after_fork(void) {
    pthread_mutex_t unlocked = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh = PTHREAD_COND_INITIALIZER;
    direct_lock = unlocked;
    direct_cond = fresh;
    for (int i = 0; i < DIRECT; i++) {
        direct[i].used = 0;
        direct[i].hashing = 0;
    }
    direct_count = 0;
    hash_started = 0;
}

/* Under direct_lock: take slot i out of hash_main's hands (it takes no more, and is out of the file on return). */
static void direct_stop_hash(int i) {
    direct[i].stop = 1;
    while (direct[i].hashing)
        pthread_cond_wait(&direct_cond, &direct_lock);
    direct_unmap(i);
}

static void direct_clear(void) { /* a session begins or ends: no handle of another session is written here */
    pthread_mutex_lock(&direct_lock);
    for (int i = 0; i < DIRECT; i++) {
        if (!direct[i].used)
            continue;
        direct_stop_hash(i);
        direct[i].used = 0;
        /* Python hashes such a file again (its registration is gone unsaid); the reference is dropped where the GIL
         * is held (the session's start and end are Python calls), else kept: one object per file left registered. */
        ((Sha256Object *)direct[i].sha)->busy = 0;
        if (PyGILState_Check())
            Py_DECREF(direct[i].sha);
        direct[i].sha = NULL;
    }
    __atomic_store_n(&direct_count, 0, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&direct_cond);
    pthread_mutex_unlock(&direct_lock);
}

static int direct_slot(uint64_t fh) { /* under direct_lock */
    for (int i = 0; i < DIRECT; i++)
        if (direct[i].used && direct[i].fh == fh)
            return i;
    return -1;
}

/* 1 if the WRITE was written and answered here; 0: the caller goes on as before (nothing written). */
static int write_direct(fuse_req_t req, uint64_t fh, const char *data, size_t size, off_t off) {
    if (__atomic_load_n(&direct_count, __ATOMIC_ACQUIRE) == 0 || size == 0)
        return 0;
    ssize_t done = 0;
    int err = 0, taken = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&direct_lock);
    int i = direct_slot(FH_KEY(fh));
    if (i >= 0 && direct[i].end == (int64_t)off && direct[i].end - direct[i].hashed > DIRECT_LAG) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += DIRECT_WAIT_MOST_S;
        direct_waits++;
        while (i >= 0 && direct[i].end - direct[i].hashed > DIRECT_LAG && !direct[i].hash_err &&
               pthread_cond_timedwait(&direct_cond, &direct_lock, &until) == 0)
            i = direct_slot(FH_KEY(fh)); /* unregistered meanwhile: the write goes to Python */
        /* Looked up again after a wait that timed out too: its timeout may fire while an unregistration holds the lock,
         * and the wait then returns ETIMEDOUT once it has the lock back, the slot freed (or another handle's by then);
         * its descriptor may be closed or truncated by the time this write lands (stop 58). */
        i = direct_slot(FH_KEY(fh));
    }
    /* The hash thread could not read the file: the write goes to Python, which takes the registration back and hashes
     * on itself (or fails the write with the error). */
    if (i >= 0 && direct[i].end == (int64_t)off && !direct[i].hash_err) {
        taken = 1;
        while ((size_t)done < size) {
            ssize_t n = pwrite(direct[i].fd, data + done, size - (size_t)done, off + done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                err = n < 0 ? errno : EIO;
                break;
            }
            done += n;
        }
        if (done > 0) { /* a short write is answered with what was written, as the file is */
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            direct[i].end += done;
            direct[i].writes++;
            direct[i].bytes += (uint64_t)done;
            direct[i].mtime_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
            pthread_cond_broadcast(&direct_cond); /* hash_main takes the new bytes */
        }
    } else if (i >= 0) {
        direct_handed++;
    }
    pthread_mutex_unlock(&direct_lock);
    Py_END_ALLOW_THREADS
    if (!taken)
        return 0;
    if (done > 0) {
        direct_writes++;
        direct_bytes += (unsigned long long)done;
        real_reply_write(req, (size_t)done);
    } else {
        real_reply_err(req, err); /* ENOSPC answers the write that met it */
    }
    answered_in_c();
    return 1;
}

/* WRITE (libfuse calls write_buf, pyfuse3 sets it): only data in memory in one piece (not spliced). */
static void write_buf_fast(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
                           struct fuse_file_info *fi) {
    if (bufv->count == 1 && bufv->idx == 0 && !(bufv->buf[0].flags & FUSE_BUF_IS_FD) &&
        bufv->off <= bufv->buf[0].size &&
        write_direct(req, fi->fh, (const char *)bufv->buf[0].mem + bufv->off, bufv->buf[0].size - bufv->off, off))
        return;
    if (fast[F_WRITE] != NULL && bufv->count == 1 && bufv->idx == 0 && !(bufv->buf[0].flags & FUSE_BUF_IS_FD) &&
        bufv->off <= bufv->buf[0].size) {
        PyObject *v, *r;
        PyObject *data = PyBytes_FromStringAndSize((const char *)bufv->buf[0].mem + bufv->off,
                                                   (Py_ssize_t)(bufv->buf[0].size - bufv->off));
        r = data == NULL ? NULL : PyObject_CallFunction(fast[F_WRITE], "KLO", (unsigned long long)fi->fh,
                                                        (long long)off, data);
        Py_XDECREF(data);
        if (take_result(req, r, F_WRITE, &v)) {
            if (v != NULL) {
                long long n = PyLong_Check(v) ? PyLong_AsLongLong(v) : -1;
                Py_DECREF(v);
                if (n < 0) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_TypeError, "a fast write answers a count, -errno or None");
                    fast_failure(req, fast[F_WRITE]);
                } else {
                    fast_answered[F_WRITE]++;
                    real_reply_write(req, (size_t)n);
                }
                answered_in_c();
            }
            return;
        }
    }
    pyfuse3_write_buf(req, ino, bufv, off, fi);
}

static void release_fast(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    if (fast[F_RELEASE] != NULL) {
        PyObject *r = PyObject_CallFunction(fast[F_RELEASE], "K", (unsigned long long)fi->fh);
        if (reply_status(req, r, F_RELEASE))
            return;
    }
    pyfuse3_release(req, ino, fi);
}

/* Closers of the flushes not yet taken by the adapter: fh -> thread id (0: two pending, unknown). */
#define CLOSERS 256
static struct {
    uint64_t fh;
    pid_t tid;
    int used;
} closers[CLOSERS];

static void note_closer(uint64_t fh, pid_t tid) {
    int free_slot = -1;
    for (int i = 0; i < CLOSERS; i++) {
        if (closers[i].used && closers[i].fh == fh) {
            closers[i].tid = 0; /* a second flush of the handle before the first was taken: ambiguous */
            return;
        }
        if (!closers[i].used && free_slot < 0)
            free_slot = i;
    }
    if (free_slot >= 0) { /* full: not noted, the adapter treats the close as its opener's */
        closers[free_slot].fh = fh;
        closers[free_slot].tid = tid;
        closers[free_slot].used = 1;
    }
}

/* A request handed to a thread (hand_flush): the capsule Python holds until reply() answers it.  A capsule freed
 * unanswered (a bug) answers EIO, so the closing process never waits forever. */
#define HANDED "lakemount.fuse._kflags.request"
typedef struct {
    fuse_req_t req; /* NULL once answered */
} handed_t;

static void handed_free(PyObject *capsule) {
    handed_t *h = PyCapsule_GetPointer(capsule, HANDED);
    if (h == NULL) {
        PyErr_Clear();
        return;
    }
    if (h->req != NULL) {
        handed_unanswered++;
        in_threads--;
        real_reply_err(h->req, EIO);
    }
    free(h);
}

/* 1 if hand_flush took the FLUSH (its thread replies); 0: pyfuse3's handler must take it (nothing was sent). */
static int hand_to_thread(fuse_req_t req, uint64_t fh, pid_t tid) {
    handed_t *h = malloc(sizeof(*h));
    if (h == NULL)
        return 0;
    h->req = req;
    PyObject *capsule = PyCapsule_New(h, HANDED, handed_free);
    if (capsule == NULL) {
        free(h);
        PyErr_Clear();
        return 0;
    }
    in_threads++; /* before the call: its thread may answer (reply: in_threads--) before it returns */
    PyObject *r = PyObject_CallFunction(hand_flush, "OKi", capsule, (unsigned long long)fh, (int)tid);
    int taken = r != NULL && r == Py_True;
    if (r == NULL)
        PyErr_WriteUnraisable(hand_flush);
    Py_XDECREF(r);
    if (!taken && h->req != NULL) { /* pyfuse3's handler answers it: the capsule, if Python kept it, must not */
        h->req = NULL;
        in_threads--;
    }
    Py_DECREF(capsule); /* taken: the thread may have answered and dropped it already; h is not touched again */
    if (taken) {
        handed_flushes++;
        answered_in_c(); /* no coroutine stored: the drain goes on */
    }
    return taken;
}

static void flush_noting_closer(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    const struct fuse_ctx *ctx = real_req_ctx(req);
    pid_t tid = ctx != NULL ? ctx->pid : 0;
    if (fast[F_FLUSH] != NULL) { /* the closer goes with the call: noted only for pyfuse3's handler */
        PyObject *r = PyObject_CallFunction(fast[F_FLUSH], "Ki", (unsigned long long)fi->fh, (int)tid);
        if (reply_status(req, r, F_FLUSH))
            return;
        if (hand_flush != NULL && hand_to_thread(req, fi->fh, tid))
            return;
    }
    note_closer(fi->fh, tid);
    pyfuse3_flush(req, ino, fi);
}

/* The kernel asks for security.capability before every write(2) of a file (file_remove_privs: FUSE clears
 * SB_NOSEC, so no inode is ever marked as having none), one round trip per write beside the WRITE itself.
 * The adapter answers every name outside user.* with EOPNOTSUPP; answering it here saves the trip into
 * Python (a trio task per request) for each of them.  user.* names go on to pyfuse3's handler. */
static void getxattr_answering_here(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
    if (name != NULL && strncmp(name, "user.", 5) != 0) {
        answered_getxattrs++;
        real_reply_err(req, EOPNOTSUPP);
        answered_in_c();
        return;
    }
    pyfuse3_getxattr(req, ino, name, size);
}

static void getattr_answering_here(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    for (int i = 0; i < KEPT; i++) {
        if (kept[i].used && kept[i].ino == ino) {
            struct timespec now;
            const struct fuse_ctx *ctx = real_req_ctx(req);
            kept[i].used = 0; /* once: the kernel keeps what it is told for the timeout */
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (ctx != NULL && ctx->uid == kept[i].uid && before(&now, &kept[i].until)) {
                answered_getattrs++;
                real_reply_attr(req, &kept[i].st, kept[i].timeout);
                answered_in_c();
                return;
            }
        }
    }
    pyfuse3_getattr(req, ino, fi);
}

/* Requests that change no directory's attributes: kept attributes stay (a FORGET drops them: the inode number
 * may come back as another directory's; an OPEN's O_TRUNC changes a file's, and only directories are kept;
 * IOCTL is what isatty(3) sends, which the mount does not implement).  Any
 * other (create, mkdir, unlink, rename, setattr, setxattr, fsync...) drops them all; a write to a control
 * file (a reset, a merge) is dropped from Python, as is everything before a kernel invalidation. */
static int keeps_attrs(uint32_t opcode) {
    switch (opcode) {
    case FUSE_GETATTR: case FUSE_LOOKUP: case FUSE_READ:
    case FUSE_WRITE: case FUSE_FLUSH: case FUSE_RELEASE: case FUSE_GETXATTR: case FUSE_LISTXATTR:
    case FUSE_STATFS: case FUSE_INTERRUPT: case FUSE_OPENDIR: case FUSE_READDIR: case FUSE_READDIRPLUS:
    case FUSE_RELEASEDIR: case FUSE_ACCESS: case FUSE_READLINK: case FUSE_OPEN: case FUSE_IOCTL: case FUSE_LSEEK:
    case FUSE_POLL:
        return 1;
    default:
        return 0;
    }
}

/* The session's reads and writes of /dev/fuse, through libfuse's custom-io hooks, only to add
 * FUSE_HANDLE_KILLPRIV_V2 to the INIT reply: the kernel then sets SB_NOSEC, so an inode found to need no
 * privilege kill (no suid/sgid, no security.capability: one getxattr) is marked S_NOSEC and its next
 * writes ask nothing until its attributes are refreshed.  In return the file system kills suid/sgid on
 * write, truncate and chown itself (lakemount/fuse/metadata.py and handles.py do; the mount has no
 * security.capability to kill).  Every other message passes unchanged. */
static ssize_t io_read(int fd, void *buf, size_t len, void *userdata) {
    (void)userdata;
    ssize_t n = read(fd, buf, len);
    if (n >= (ssize_t)sizeof(struct fuse_in_header)) {
        const struct fuse_in_header *in = buf;
        requests_read++;
        if (!keeps_attrs(in->opcode))
            drop_kept();
    }
    if (n >= (ssize_t)(sizeof(struct fuse_in_header) + 4 * sizeof(uint32_t))) {
        const struct fuse_in_header *in = buf;
        if (in->opcode == FUSE_INIT) {
            const struct fuse_init_in *init = (const void *)(in + 1);
            init_unique = in->unique;
            killpriv_offered = (init->flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
            killpriv_granted = killpriv_offered; /* the reply below takes it: known to init() before it is sent */
            passthrough_offered = n >= (ssize_t)(sizeof(struct fuse_in_header) + 5 * sizeof(uint32_t)) &&
                                  (init->flags & FUSE_INIT_EXT) && (init->flags2 & LM_FUSE_PASSTHROUGH2);
            passthrough_granted = passthrough_wanted && passthrough_offered;
        }
    }
    return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    if (init_unique != 0 && count >= 2 && iov[0].iov_len == sizeof(struct fuse_out_header) &&
        iov[1].iov_len >= 4 * sizeof(uint32_t)) {
        const struct fuse_out_header *out = iov[0].iov_base;
        if (out->unique == init_unique) {
            init_unique = 0;
            if (out->error == 0 && killpriv_offered)
                ((struct fuse_init_out *)iov[1].iov_base)->flags |= FUSE_HANDLE_KILLPRIV_V2;
            else
                killpriv_granted = 0;
            struct lm_fuse_init_out *init = iov[1].iov_base;
            if (out->error == 0 && passthrough_granted && iov[1].iov_len >= sizeof(*init) &&
                !(init->flags & FUSE_WRITEBACK_CACHE)) { /* the kernel refuses passthrough beside the writeback cache */
                init->flags |= FUSE_INIT_EXT;
                init->flags2 |= LM_FUSE_PASSTHROUGH2;
                init->max_stack_depth = LM_MAX_STACK_DEPTH;
            } else {
                passthrough_granted = 0;
            }
        }
    }
    if (reply_backing != 0 && count >= 2 && iov[0].iov_len == sizeof(struct fuse_out_header) &&
        iov[1].iov_len >= sizeof(struct lm_fuse_open_out) && ((const struct fuse_out_header *)iov[0].iov_base)->error == 0) {
        /* an open's reply is its fuse_open_out; a create's, a fuse_entry_out and then the fuse_open_out */
        struct lm_fuse_open_out *o =
            (void *)((char *)iov[1].iov_base + iov[1].iov_len - sizeof(struct lm_fuse_open_out));
        /* the kernel refuses (EIO at open) any flag outside FOPEN_PASSTHROUGH_MASK (passthrough, direct_io, noflush,
         * parallel direct writes), keep_cache among them; direct_io would send the reads and writes to the daemon */
        o->open_flags = (o->open_flags & FOPEN_NOFLUSH) | LM_FOPEN_PASSTHROUGH;
        o->backing_id = reply_backing;
        reply_backing = 0;
        passthrough_replies++;
    }
    return writev(fd, iov, count);
}

__attribute__((visibility("default"))) int fuse_session_mount(struct fuse_session *se, const char *mountpoint) {
    int res = real_session_mount(se, mountpoint);
    if (res == 0 && real_custom_io != NULL && real_session_fd != NULL) {
        static const struct fuse_custom_io io = {.writev = io_writev, .read = io_read};
        /* fails only without memory: the plain path stays */
        io_hooked = real_custom_io(se, &io, real_session_fd(se)) == 0;
    }
    return res;
}

__attribute__((visibility("default"))) struct fuse_session *fuse_session_new(struct fuse_args *args,
                                                                           const struct fuse_lowlevel_ops *op,
                                                                           size_t op_size, void *userdata) {
    if (op != NULL && op->flush != NULL && op_size <= sizeof(wrapped_ops)) {
        memset(&wrapped_ops, 0, sizeof(wrapped_ops));
        memcpy(&wrapped_ops, op, op_size);
        pyfuse3_flush = op->flush;
        wrapped_ops.flush = flush_noting_closer;
        if (op->getxattr != NULL) {
            pyfuse3_getxattr = op->getxattr;
            wrapped_ops.getxattr = getxattr_answering_here;
        }
        if (op->getattr != NULL && real_reply_attr != NULL) {
            pyfuse3_getattr = op->getattr;
            wrapped_ops.getattr = getattr_answering_here;
        }
        if (real_reply_entry != NULL && real_reply_create != NULL && real_reply_write != NULL &&
            real_receive_buf != NULL && real_process_buf != NULL && real_session_exited != NULL &&
            real_session_fd != NULL) { /* the fast path: handlers that call the adapter's fast_* when it set them */
#define WRAP(field, saved, wrapper) \
    if (op->field != NULL) {          \
        saved = op->field;            \
        wrapped_ops.field = wrapper;  \
    }
            WRAP(lookup, pyfuse3_lookup, lookup_fast)
            WRAP(create, pyfuse3_create, create_fast)
            WRAP(write_buf, pyfuse3_write_buf, write_buf_fast)
            WRAP(release, pyfuse3_release, release_fast)
#undef WRAP
        }
        op = &wrapped_ops;
    }
    direct_clear();
    free(drain_buf.mem); /* sized by the previous session */
    memset(&drain_buf, 0, sizeof(drain_buf));
    session = real_session_new(args, op, op_size, userdata);
    return session;
}

/* The session is gone: backing_open/backing_close must not reach its fd (ENOTCONN from then on). */
__attribute__((visibility("default"))) void fuse_session_destroy(struct fuse_session *se) {
    if (se == session) {
        session = NULL;
        passthrough_granted = 0;
        direct_clear();
    }
    if (real_session_destroy != NULL)
        real_session_destroy(se);
}

__attribute__((visibility("default"))) int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *f) {
    struct fuse_file_info fi = *f;
    if (fi.fh & FH_NOFLUSH)
        fi.noflush = 1;
    if (fi.fh & FH_CACHE_DIR) {
        fi.cache_readdir = 1;
        fi.keep_cache = 1;
    }
    reply_backing = passthrough_granted ? take_passing(f->fh) : 0;
    int res = real_reply_open(req, &fi);
    reply_backing = 0;
    return res;
}

/* pyfuse3's create handler and the fast path's reply: as fuse_reply_open, for a passthrough open's backing id. */
__attribute__((visibility("default"))) int fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
                                                             const struct fuse_file_info *f) {
    if (real_reply_create == NULL)
        return -ENOSYS;
    reply_backing = passthrough_granted ? take_passing(f->fh) : 0;
    int res = real_reply_create(req, e, f);
    reply_backing = 0;
    return res;
}

static PyObject *kflags_active(PyObject *self, PyObject *unused) {
    /* Active if a global lookup of the symbol finds this definition. */
    void *found = dlsym(RTLD_DEFAULT, "fuse_reply_open");
    return PyBool_FromLong(found == (void *)&fuse_reply_open);
}

static PyObject *kflags_closer(PyObject *self, PyObject *arg) {
    /* The thread that sent handle fh's pending FLUSH (taken: asked once), 0 if not known. */
    unsigned long long fh = PyLong_AsUnsignedLongLong(arg);
    if (fh == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    for (int i = 0; i < CLOSERS; i++) {
        if (closers[i].used && closers[i].fh == fh) {
            closers[i].used = 0;
            return PyLong_FromLong((long)closers[i].tid);
        }
    }
    return PyLong_FromLong(0);
}

static PyObject *kflags_wraps_flush(PyObject *self, PyObject *unused) {
    /* Active if the session was made through this module's fuse_session_new. */
    void *found = dlsym(RTLD_DEFAULT, "fuse_session_new");
    return PyBool_FromLong(found == (void *)&fuse_session_new);
}

static PyObject *kflags_answered_getxattrs(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(answered_getxattrs);
}

static PyObject *kflags_killpriv(PyObject *self, PyObject *unused) {
    /* Active if the kernel took FUSE_HANDLE_KILLPRIV_V2 from this session's INIT reply. */
    return PyBool_FromLong(killpriv_granted);
}

static PyObject *kflags_requests_read(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(requests_read);
}

static PyObject *kflags_drops(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(drops);
}

static PyObject *kflags_answered_getattrs(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(answered_getattrs);
}

static PyObject *kflags_keeps_attrs(PyObject *self, PyObject *unused) {
    /* Whether kept attributes can be answered: GETATTR passes through here and every read is seen. */
    return PyBool_FromLong(io_hooked && pyfuse3_getattr != NULL);
}

static PyObject *kflags_drop_attrs(PyObject *self, PyObject *unused) {
    drop_kept();
    Py_RETURN_NONE;
}

static PyObject *kflags_keep_attr(PyObject *self, PyObject *args) {
    /* keep_attr(seq, uid, ino, mode, nlink, uid, gid, rdev, size, blksize, blocks, atime_ns, mtime_ns, ctime_ns,
     * timeout): False (nothing kept) if the kept attributes were dropped since drops() returned seq: a request that
     * may change a directory was read meanwhile, or Python dropped them (a RELEASE, READ or GETATTR read
     * meanwhile changes no directory and does not refuse them). */
    unsigned long long seq, ino, size, blocks, rdev;
    unsigned int mode, nlink, uid, gid, caller;
    long blksize;
    long long atime, mtime, ctime;
    double timeout;
    if (!PyArg_ParseTuple(args, "KIKIIIIKKlKLLLd", &seq, &caller, &ino, &mode, &nlink, &uid, &gid, &rdev, &size,
                          &blksize, &blocks, &atime, &mtime, &ctime, &timeout))
        return NULL;
    if (seq != drops || !io_hooked || pyfuse3_getattr == NULL || timeout <= 0 || atime < 0 || mtime < 0 ||
        ctime < 0) /* a time before 1970 is left to pyfuse3's own conversion */
        Py_RETURN_FALSE;
    int slot = -1;
    for (int i = 0; i < KEPT; i++)
        if (kept[i].used && kept[i].ino == ino)
            slot = i;
    if (slot < 0) {
        slot = kept_next;
        kept_next = (kept_next + 1) % KEPT;
    }
    struct stat *st = &kept[slot].st;
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    st->st_mode = mode;
    st->st_nlink = nlink;
    st->st_uid = uid;
    st->st_gid = gid;
    st->st_rdev = rdev;
    st->st_size = size;
    st->st_blksize = blksize;
    st->st_blocks = blocks;
    st->st_atim.tv_sec = atime / 1000000000LL;
    st->st_atim.tv_nsec = atime % 1000000000LL;
    st->st_mtim.tv_sec = mtime / 1000000000LL;
    st->st_mtim.tv_nsec = mtime % 1000000000LL;
    st->st_ctim.tv_sec = ctime / 1000000000LL;
    st->st_ctim.tv_nsec = ctime % 1000000000LL;
    double keep = timeout < KEEP_FOR_S ? timeout : KEEP_FOR_S;
    clock_gettime(CLOCK_MONOTONIC, &kept[slot].until);
    kept[slot].until.tv_sec += (time_t)keep;
    kept[slot].until.tv_nsec += (long)((keep - (double)(time_t)keep) * 1e9);
    if (kept[slot].until.tv_nsec >= 1000000000L) {
        kept[slot].until.tv_sec++;
        kept[slot].until.tv_nsec -= 1000000000L;
    }
    kept[slot].timeout = timeout;
    kept[slot].ino = ino;
    kept[slot].uid = (uid_t)caller;
    kept[slot].used = 1;
    Py_RETURN_TRUE;
}

static PyObject *kflags_set_fast(PyObject *self, PyObject *args) {
    /* set_fast(obj, drain): obj's fast_lookup, fast_create, fast_write, fast_flush, fast_release answer those
     * requests first (a missing method: that op goes to pyfuse3 as before), and its hand_flush, if it has one,
     * takes a FLUSH that fast_flush gave back; None: none.  drain: read the waiting requests after one answered
     * here. */
    PyObject *obj;
    int drain_requests;
    if (!PyArg_ParseTuple(args, "Op", &obj, &drain_requests))
        return NULL;
    PyObject *got[F_OPS] = {NULL};
    for (int i = 0; i < F_OPS && obj != Py_None; i++) {
        got[i] = PyObject_GetAttrString(obj, fast_names[i]);
        if (got[i] == NULL)
            PyErr_Clear();
    }
    for (int i = 0; i < F_OPS; i++) {
        Py_XSETREF(fast[i], got[i]);
    }
    PyObject *hand = NULL;
    if (obj != Py_None && (hand = PyObject_GetAttrString(obj, "hand_flush")) == NULL)
        PyErr_Clear();
    Py_XSETREF(hand_flush, hand);
    drain_on = obj != Py_None && drain_requests;
    Py_RETURN_NONE;
}

static PyObject *kflags_reply(PyObject *self, PyObject *args) {
    /* reply(request, errno): answer a FLUSH handed to a thread (hand_flush) with errno (0: done), once; from any
     * thread (libfuse's replies are thread-safe).  ValueError if it was answered already. */
    PyObject *capsule;
    int err;
    if (!PyArg_ParseTuple(args, "Oi", &capsule, &err))
        return NULL;
    handed_t *h = PyCapsule_GetPointer(capsule, HANDED);
    if (h == NULL)
        return NULL;
    fuse_req_t req = h->req;
    if (req == NULL) {
        PyErr_SetString(PyExc_ValueError, "the request was answered already");
        return NULL;
    }
    h->req = NULL; /* under the GIL: no second answer */
    in_threads--;
    int res;
    Py_BEGIN_ALLOW_THREADS
    res = real_reply_err(req, err < 0 ? -err : err);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(res);
}

static int put_count(PyObject *d, const char *prefix, const char *name, unsigned long long value) {
    char key[48];
    snprintf(key, sizeof(key), "%s%s", prefix, name);
    PyObject *v = PyLong_FromUnsignedLongLong(value);
    int res = v == NULL ? -1 : PyDict_SetItemString(d, key, v);
    Py_XDECREF(v);
    return res;
}

static PyObject *kflags_fast_counts(PyObject *self, PyObject *unused) {
    /* {name: count} of the fast path so far (kflags.fast_counts says what each is). */
    static const char *const ops[F_OPS] = {"lookups", "creates", "writes", "flushes", "releases"};
    PyObject *d = PyDict_New();
    int bad = d == NULL;
    for (int i = 0; i < F_OPS && !bad; i++)
        bad = put_count(d, "fast_", ops[i], fast_answered[i]) < 0 || put_count(d, "declined_", ops[i], fast_declined[i]) < 0;
    if (!bad)
        bad = put_count(d, "fast_", "failed", fast_failed) < 0 || put_count(d, "", "drains", drains) < 0 ||
              put_count(d, "", "handed_flushes", handed_flushes) < 0 ||
              put_count(d, "", "handed_unanswered", handed_unanswered) < 0 ||
              put_count(d, "", "drained", drained) < 0 || put_count(d, "", "drained_to_python", drained_to_python) < 0 ||
              put_count(d, "", "direct_writes", direct_writes) < 0 || put_count(d, "", "direct_bytes", direct_bytes) < 0 ||
              put_count(d, "", "direct_handed", direct_handed) < 0 || put_count(d, "", "direct_waits", direct_waits) < 0 ||
              put_count(d, "", "hash_steps", hash_steps) < 0 || put_count(d, "", "hash_bytes", hash_bytes) < 0 ||
              put_count(d, "", "hash_idle", hash_idle) < 0 ||
              put_count(d, "", "drain_waits", drain_waits) < 0 || put_count(d, "", "drain_waited", drain_waited) < 0 ||
              put_count(d, "", "drain_waits_skipped", drain_waits_skipped) < 0 ||
              put_count(d, "", "threads_out", (unsigned long long)(in_threads < 0 ? 0 : in_threads)) < 0;
    if (bad) {
        Py_XDECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *kflags_set_drain_wait(PyObject *self, PyObject *arg) {
    /* set_drain_wait(us): how long a drain that finds no request waiting waits for one (0: not at all). */
    long us = PyLong_AsLong(arg);
    if (us == -1 && PyErr_Occurred())
        return NULL;
    if (us < 0 || us > 10000000L) {
        PyErr_SetString(PyExc_ValueError, "a drain waits 0 to 10,000,000 us");
        return NULL;
    }
    drain_wait_ns = us * 1000L;
    Py_RETURN_NONE;
}

static PyObject *kflags_threads_out(PyObject *self, PyObject *arg) {
    /* threads_out(n): n more (n < 0: fewer) of the adapter's threads answer a request; the drain waits only while
     * none does.  Returns how many do now. */
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    in_threads += n;
    return PyLong_FromLong(in_threads);
}

static PyObject *kflags_fast_wrapped(PyObject *self, PyObject *unused) {
    /* Whether the session's LOOKUP, CREATE, WRITE and RELEASE pass through this module's fast wrappers. */
    return PyBool_FromLong(pyfuse3_lookup != NULL && pyfuse3_create != NULL && pyfuse3_write_buf != NULL &&
                           pyfuse3_release != NULL);
}

static PyObject *kflags_direct_write_register(PyObject *self, PyObject *args) {
    /* direct_write_register(fh, fd, end, sha): write handle fh's WRITEs at ``end`` into fd here from now on, and have
     * the hash thread feed ``sha`` (a fresh Sha256) the file's bytes from its start as they come; False if the table is
     * full, the handle registered already or sha in use (its writes go to Python as before). */
    unsigned long long fh;
    int fd;
    long long end;
    PyObject *sha;
    if (!PyArg_ParseTuple(args, "KiLO!", &fh, &fd, &end, sha256_type, &sha))
        return NULL;
    if (fd < 0 || end < 0 || pyfuse3_write_buf == NULL || session == NULL || ((Sha256Object *)sha)->busy)
        Py_RETURN_FALSE;
    if (!hash_started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int err = pthread_create(&t, &attr, hash_main, NULL);
        pthread_attr_destroy(&attr);
        if (err) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        pthread_setname_np(t, "lm-shim-hash");
        hash_started = 1;
    }
    int done = 0;
    Py_INCREF(sha);
    ((Sha256Object *)sha)->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&direct_lock);
    if (direct_slot(FH_KEY(fh)) < 0) {
        for (int i = 0; i < DIRECT && !done; i++) {
            if (!direct[i].used) {
                direct[i].fh = FH_KEY(fh);
                direct[i].fd = fd;
                direct[i].end = end;
                direct[i].writes = direct[i].bytes = 0;
                direct[i].mtime_ns = 0;
                direct[i].hashed = 0;
                direct[i].sha = sha;
                direct[i].hashing = direct[i].stop = direct[i].hash_err = 0;
                direct[i].map = NULL;
                direct[i].used = 1;
                __atomic_add_fetch(&direct_count, 1, __ATOMIC_RELEASE);
                pthread_cond_broadcast(&direct_cond); /* hash_main starts on it */
                done = 1;
            }
        }
    }
    pthread_mutex_unlock(&direct_lock);
    Py_END_ALLOW_THREADS
    if (!done) {
        ((Sha256Object *)sha)->busy = 0;
        Py_DECREF(sha);
    }
    return PyBool_FromLong(done);
}

static PyObject *direct_take(PyObject *arg, int drop) {
    unsigned long long fh = PyLong_AsUnsignedLongLong(arg);
    if (fh == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    int i;
    long long end = 0, mtime = 0, hashed = 0;
    unsigned long long writes = 0, bytes = 0;
    PyObject *sha = NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&direct_lock);
    i = direct_slot(FH_KEY(fh));
    if (i >= 0) { /* read under the lock: the state the unregistration ends */
        if (drop)
            direct_stop_hash(i); /* the hash thread is out of the file and its Sha256: Python may go on with both */
        end = direct[i].end;
        writes = direct[i].writes;
        bytes = direct[i].bytes;
        mtime = direct[i].mtime_ns;
        hashed = direct[i].hashed;
        if (drop) {
            sha = direct[i].sha;
            direct[i].sha = NULL;
            direct[i].used = 0;
            __atomic_sub_fetch(&direct_count, 1, __ATOMIC_RELEASE);
            pthread_cond_broadcast(&direct_cond); /* a write waiting for its hash goes to Python now */
        }
    }
    pthread_mutex_unlock(&direct_lock);
    Py_END_ALLOW_THREADS
    if (sha != NULL) {
        ((Sha256Object *)sha)->busy = 0;
        Py_DECREF(sha);
    }
    if (i < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LKKLL)", end, writes, bytes, mtime, hashed);
}

static PyObject *kflags_direct_active(PyObject *self, PyObject *unused) {
    /* Whether handles may be registered for direct writes: a session is up and its WRITEs pass write_buf_fast. */
    return PyBool_FromLong(session != NULL && pyfuse3_write_buf != NULL && sha256_type != NULL);
}

static PyObject *kflags_direct_write_wait(PyObject *self, PyObject *args) {
    /* direct_write_wait(seq, timeout): wait until a file's hash passed a multiple of FLUSH_STEP since direct_seq was
     * seq, or timeout seconds; returns direct_seq (the follower's idle wait: it writes back what is hashed). */
    unsigned long long seq, now_seq;
    double timeout;
    if (!PyArg_ParseTuple(args, "Kd", &seq, &timeout))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + (long long)(timeout * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(&direct_lock);
    while (direct_seq == seq && pthread_cond_timedwait(&direct_cond, &direct_lock, &until) == 0)
        ;
    now_seq = direct_seq;
    pthread_mutex_unlock(&direct_lock);
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong(now_seq);
}

static PyObject *kflags_direct_write_state(PyObject *self, PyObject *arg) {
    /* (end, writes, bytes, mtime_ns, hashed) of handle fh's registration (None: not registered). */
    return direct_take(arg, 0);
}

static PyObject *kflags_direct_write_unregister(PyObject *self, PyObject *arg) {
    /* Stop writing handle fh's WRITEs here: its last (end, writes, bytes, mtime_ns, hashed), None if it was not
     * registered.  Once this returns no write of it is under way here, and the hash thread has left its file and its
     * Sha256, which holds the SHA-256 of the file's first ``hashed`` bytes. */
    return direct_take(arg, 1);
}

static PyObject *kflags_want_passthrough(PyObject *self, PyObject *arg) {
    /* Ask for FUSE passthrough in the next INIT reply (before the mount). */
    int want = PyObject_IsTrue(arg);
    if (want < 0)
        return NULL;
    passthrough_wanted = want;
    Py_RETURN_NONE;
}

static PyObject *kflags_passthrough(PyObject *self, PyObject *unused) {
    /* (offered, granted): the kernel's INIT offered FUSE_PASSTHROUGH; the reply asked for it. */
    return Py_BuildValue("(OO)", passthrough_offered ? Py_True : Py_False, passthrough_granted ? Py_True : Py_False);
}

static int live_session_fd(void) {
    /* The session's fd for a backing ioctl; -1 with OSError(ENOTCONN) set when no session is up. */
    if (session == NULL || real_session_fd == NULL) {
        errno = ENOTCONN;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return real_session_fd(session);
}

static PyObject *kflags_backing_open(PyObject *self, PyObject *arg) {
    /* Register fd as a backing file on the session fd: its backing id (OSError with the ioctl's errno). */
    int fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    int sfd = live_session_fd();
    if (sfd < 0)
        return NULL;
    struct lm_fuse_backing_map map = {.fd = fd, .flags = 0, .padding = 0};
    int id;
    Py_BEGIN_ALLOW_THREADS
    id = ioctl(sfd, LM_FUSE_DEV_IOC_BACKING_OPEN, &map);
    Py_END_ALLOW_THREADS
    if (id < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLong(id);
}

static PyObject *kflags_backing_close(PyObject *self, PyObject *arg) {
    /* Unregister a backing id (the kernel keeps the file for opens that still use it; OSError with the errno). */
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    int sfd = live_session_fd();
    if (sfd < 0)
        return NULL;
    uint32_t id = (uint32_t)v;
    int res;
    Py_BEGIN_ALLOW_THREADS
    res = ioctl(sfd, LM_FUSE_DEV_IOC_BACKING_CLOSE, &id);
    Py_END_ALLOW_THREADS
    if (res < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *kflags_pass_through(PyObject *self, PyObject *args) {
    /* pass_through(fh, backing_id): send the coming open/create reply of handle fh as passthrough to that backing id;
     * False if it cannot (not granted, or the table is full): the reply goes out as before. */
    unsigned long long fh;
    int id;
    if (!PyArg_ParseTuple(args, "Ki", &fh, &id))
        return NULL;
    if (!passthrough_granted || id <= 0)
        Py_RETURN_FALSE;
    int done = 0;
    pthread_mutex_lock(&passing_lock);
    for (int i = 0; i < PASSING && !done; i++) {
        if (!passing[i].used) {
            passing[i].fh = fh;
            passing[i].backing_id = id;
            passing[i].used = 1;
            __atomic_add_fetch(&passing_count, 1, __ATOMIC_RELEASE);
            done = 1;
        }
    }
    pthread_mutex_unlock(&passing_lock);
    return PyBool_FromLong(done);
}

static PyObject *kflags_passthrough_replies(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(passthrough_replies);
}

static PyMethodDef methods[] = {
    {"want_passthrough", kflags_want_passthrough, METH_O, "Ask for FUSE passthrough in the next INIT reply."},
    {"passthrough", kflags_passthrough, METH_NOARGS, "(offered, granted) of FUSE passthrough at INIT."},
    {"backing_open", kflags_backing_open, METH_O, "Register an fd as a passthrough backing file: its id."},
    {"backing_close", kflags_backing_close, METH_O, "Unregister a passthrough backing id."},
    {"pass_through", kflags_pass_through, METH_VARARGS, "Send handle fh's coming open reply as passthrough."},
    {"passthrough_replies", kflags_passthrough_replies, METH_NOARGS, "Open replies sent as passthrough so far."},
    {"set_fast", kflags_set_fast, METH_VARARGS,
     "Register the object whose fast_* methods answer LOOKUP, CREATE, WRITE, FLUSH, RELEASE first (None: none)."},
    {"fast_counts", kflags_fast_counts, METH_NOARGS, "The fast path's counters, by name."},
    {"set_drain_wait", kflags_set_drain_wait, METH_O, "How long (us) a drain that finds nothing waits for a request."},
    {"threads_out", kflags_threads_out, METH_O, "Count the adapter's threads answering a request (+n / -n): now."},
    {"reply", kflags_reply, METH_VARARGS, "Answer a FLUSH handed to a thread (hand_flush) with an errno (0: done)."},
    {"fast_wrapped", kflags_fast_wrapped, METH_NOARGS, "True if the session's requests pass the fast wrappers."},
    {"direct_write_register", kflags_direct_write_register, METH_VARARGS,
     "Write a handle's appends into a temp file's fd in C from now on (stop 57)."},
    {"direct_write_state", kflags_direct_write_state, METH_O,
     "(end, writes, bytes, mtime_ns, hashed) of a direct handle."},
    {"direct_active", kflags_direct_active, METH_NOARGS, "True if direct writes can be registered (a session is up)."},
    {"direct_write_wait", kflags_direct_write_wait, METH_VARARGS, "Wait for the next 16 MiB hashed (or timeout)."},
    {"direct_write_unregister", kflags_direct_write_unregister, METH_O,
     "Stop a handle's direct writes: its last (end, writes, bytes, mtime_ns, hashed), None if not registered."},
    {"requests_read", kflags_requests_read, METH_NOARGS,
     "Requests read from /dev/fuse so far (0 without the io hooks)."},
    {"drops", kflags_drops, METH_NOARGS,
     "Times every kept attribute was dropped so far (a request that may change a directory, or drop_attrs)."},
    {"answered_getattrs", kflags_answered_getattrs, METH_NOARGS, "GETATTRs answered here from kept attributes."},
    {"keeps_attrs", kflags_keeps_attrs, METH_NOARGS, "True if kept attributes are answered here."},
    {"drop_attrs", kflags_drop_attrs, METH_NOARGS, "Drop every kept attribute."},
    {"keep_attr", kflags_keep_attr, METH_VARARGS,
     "Keep a directory's attributes for its next GETATTR (False if they were dropped since drops() gave seq)."},
    {"active", kflags_active, METH_NOARGS, "True if pyfuse3's open replies pass through this module."},
    {"closer", kflags_closer, METH_O, "The thread id that sent the pending FLUSH of a handle (0: not known)."},
    {"wraps_flush", kflags_wraps_flush, METH_NOARGS, "True if FLUSH requests pass through this module."},
    {"killpriv", kflags_killpriv, METH_NOARGS,
     "True if the kernel leaves killing suid/sgid on write, truncate and chown to the mount (HANDLE_KILLPRIV_V2)."},
    {"answered_getxattrs", kflags_answered_getxattrs, METH_NOARGS,
     "getxattr requests of names outside user.* answered EOPNOTSUPP here, without Python."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kflags", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kflags(void) {
    void *lib = dlopen("libfuse3.so.3", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_ImportError, "libfuse3.so.3: %s", dlerror());
        return NULL;
    }
    real_reply_open = (reply_open_fn)dlsym(lib, "fuse_reply_open");
    if (real_reply_open == NULL) {
        PyErr_SetString(PyExc_ImportError, "libfuse3.so.3 has no fuse_reply_open");
        return NULL;
    }
    real_session_new = (session_new_fn)dlsym(lib, "fuse_session_new");
    real_req_ctx = (req_ctx_fn)dlsym(lib, "fuse_req_ctx");
    real_reply_err = (reply_err_fn)dlsym(lib, "fuse_reply_err");
    real_session_mount = (session_mount_fn)dlsym(lib, "fuse_session_mount");
    real_session_fd = (session_fd_fn)dlsym(lib, "fuse_session_fd");
    real_custom_io = (custom_io_fn)dlsym(lib, "fuse_session_custom_io"); /* libfuse 3.14 on: else no KILLPRIV_V2 */
    real_reply_attr = (reply_attr_fn)dlsym(lib, "fuse_reply_attr"); /* NULL: GETATTR always goes to Python */
    /* Any of these NULL: no fast path (every request goes to pyfuse3 as before). */
    real_reply_entry = (reply_entry_fn)dlsym(lib, "fuse_reply_entry");
    real_reply_create = (reply_create_fn)dlsym(lib, "fuse_reply_create");
    real_reply_write = (reply_write_fn)dlsym(lib, "fuse_reply_write");
    real_receive_buf = (receive_buf_fn)dlsym(lib, "fuse_session_receive_buf");
    real_process_buf = (process_buf_fn)dlsym(lib, "fuse_session_process_buf");
    real_session_exited = (session_exited_fn)dlsym(lib, "fuse_session_exited");
    real_session_destroy = (session_destroy_fn)dlsym(lib, "fuse_session_destroy");
    if (real_session_new == NULL || real_req_ctx == NULL || real_reply_err == NULL || real_session_mount == NULL ||
        real_session_destroy == NULL) {
        PyErr_SetString(PyExc_ImportError,
                        "libfuse3.so.3 has no fuse_session_new, fuse_session_destroy, fuse_req_ctx or fuse_reply_err");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    load_crypto();
    pthread_atfork(NULL, NULL, direct_after_fork);
    if (m != NULL && md_ctx_new != NULL) {
        sha256_type = (PyTypeObject *)PyType_FromSpec(&sha256_spec);
        if (sha256_type == NULL || PyModule_AddObjectRef(m, "Sha256", (PyObject *)sha256_type) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
