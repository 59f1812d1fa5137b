/* The per-record loops of graveler's hot paths, each over whole arrays of records.
 *
 * decode_block(data, offset, size, strip) -> (keys, values)
 * Walks the prefix-compressed entries of one block (data or index) and returns
 * the full keys (with `strip` trailing bytes removed: 8 for internal keys) and
 * the values as two lists.  Raises ValueError on malformed input; the Python
 * caller turns that into lakemount's Corrupt.
 *
 * The commit path (staging files merged over a base metarange into new ranges)
 * works on parallel lists of keys and values; these do its per-record steps:
 * merge_newest (k-way merge of sorted runs, the newest run's record of a key
 * wins), live (staging-file tagged values to record values or None), overlay
 * (changes over base records, as apply's record loop merges them), cut_ends
 * (where content-defined range cuts fall) and range_feed (what a range's id
 * hashes).  Each has a pure-Python equivalent beside its caller, used when
 * this extension is not built, and tests check the two agree.
 *
 * encode_table(keys, values, block_size, restart_interval, format_version) -> bytes writes a
 * whole table (see its comment); sstable.encode_table_py is its pure-Python twin.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int varint32(const unsigned char *p, Py_ssize_t limit, Py_ssize_t *pos, uint32_t *out) {
    uint32_t result = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (*pos >= limit) return -1;
        unsigned char b = p[(*pos)++];
        result |= (uint32_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) { *out = result; return 0; }
    }
    return -1;
}

static PyObject *decode_block(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t offset, size, strip;
    if (!PyArg_ParseTuple(args, "y*nnn", &buf, &offset, &size, &strip)) return NULL;
    const unsigned char *p = (const unsigned char *)buf.buf;
    PyObject *keys = NULL, *values = NULL, *result = NULL;
    unsigned char *key = NULL;
    Py_ssize_t cap = 256;
    if (offset < 0 || size < 4 || offset + size > buf.len) goto malformed;
    Py_ssize_t end = offset + size;
    uint32_t num_restarts;
    memcpy(&num_restarts, p + end - 4, 4);  /* little-endian hosts only (x86_64, aarch64) */
    num_restarts &= 0x7FFFFFFF;
    if ((Py_ssize_t)num_restarts * 4 + 4 > size) goto malformed;
    Py_ssize_t limit = end - 4 - 4 * (Py_ssize_t)num_restarts;
    keys = PyList_New(0);
    values = PyList_New(0);
    key = (unsigned char *)PyMem_Malloc(cap);
    if (!keys || !values || !key) goto fail;
    Py_ssize_t pos = offset, klen = 0;
    while (pos < limit) {
        uint32_t shared, non_shared, vlen;
        if (varint32(p, limit, &pos, &shared) || varint32(p, limit, &pos, &non_shared) ||
            varint32(p, limit, &pos, &vlen))
            goto malformed;
        if (shared > klen || pos + (Py_ssize_t)non_shared + (Py_ssize_t)vlen > limit) goto malformed;
        Py_ssize_t need = (Py_ssize_t)shared + non_shared;
        if (need > cap) {
            while (cap < need) cap *= 2;
            unsigned char *grown = (unsigned char *)PyMem_Realloc(key, cap);
            if (!grown) goto fail;
            key = grown;
        }
        memcpy(key + shared, p + pos, non_shared);
        klen = need;
        pos += non_shared;
        if (klen < strip) goto malformed;
        PyObject *k = PyBytes_FromStringAndSize((const char *)key, klen - strip);
        if (!k) goto fail;
        int rc = PyList_Append(keys, k);
        Py_DECREF(k);
        if (rc) goto fail;
        PyObject *v = PyBytes_FromStringAndSize((const char *)p + pos, vlen);
        if (!v) goto fail;
        rc = PyList_Append(values, v);
        Py_DECREF(v);
        if (rc) goto fail;
        pos += vlen;
    }
    result = PyTuple_Pack(2, keys, values);
    goto fail; /* shared cleanup */
malformed:
    PyErr_SetString(PyExc_ValueError, "malformed block");
fail:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    if (key) PyMem_Free(key);
    PyBuffer_Release(&buf);
    return result;
}

/* Both arguments must be bytes (checked by the callers below). */
static inline int bytes_cmp(PyObject *a, PyObject *b) {
    Py_ssize_t la = PyBytes_GET_SIZE(a), lb = PyBytes_GET_SIZE(b);
    int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), la < lb ? la : lb);
    if (c) return c;
    return la < lb ? -1 : la > lb;
}

static int all_bytes(PyObject *list, Py_ssize_t lo, Py_ssize_t hi, const char *what) {
    for (Py_ssize_t i = lo; i < hi; i++) {
        if (!PyBytes_Check(PyList_GET_ITEM(list, i))) {
            PyErr_Format(PyExc_TypeError, "%s must be bytes", what);
            return -1;
        }
    }
    return 0;
}

/* Output (keys, values) lists made as long as they can get, filled in place, cut to what was filled. */
typedef struct {
    PyObject *keys, *values;
    Py_ssize_t n, cap;
} pairs_t;

static int pairs_init(pairs_t *p, Py_ssize_t cap) {
    p->n = 0;
    p->cap = cap;
    p->keys = PyList_New(cap);
    p->values = PyList_New(cap);
    return p->keys && p->values ? 0 : -1;
}

/* Borrowed references; no bounds check: callers never put more than `cap` pairs. */
static inline void pairs_put(pairs_t *p, PyObject *k, PyObject *v) {
    Py_INCREF(k);
    Py_INCREF(v);
    PyList_SET_ITEM(p->keys, p->n, k);
    PyList_SET_ITEM(p->values, p->n, v);
    p->n++;
}

/* The unfilled tail is NULL items, which list slicing and deallocation tolerate. */
static int pairs_cut(pairs_t *p) {
    if (p->n == p->cap) return 0;
    if (PyList_SetSlice(p->keys, p->n, p->cap, NULL)) return -1;
    return PyList_SetSlice(p->values, p->n, p->cap, NULL);
}

static void pairs_drop(pairs_t *p) {
    Py_XDECREF(p->keys);
    Py_XDECREF(p->values);
}

/* A run being merged: its lists, the index range [pos, end) left, and its current key's bytes. */
typedef struct {
    PyObject *keys, *values;
    Py_ssize_t pos, end;
    const char *k;
    Py_ssize_t klen;
} run_t;

static inline void run_load(run_t *r) {
    PyObject *k = PyList_GET_ITEM(r->keys, r->pos);
    r->k = PyBytes_AS_STRING(k);
    r->klen = PyBytes_GET_SIZE(k);
}

static inline int run_cmp(const run_t *a, const run_t *b) {
    int c = memcmp(a->k, b->k, a->klen < b->klen ? a->klen : b->klen);
    if (c) return c;
    return a->klen < b->klen ? -1 : a->klen > b->klen;
}

/* Heap order: smaller key first; for equal keys the newer run (higher index) first. */
static inline int run_before(const run_t *runs, int a, int b) {
    int c = run_cmp(&runs[a], &runs[b]);
    return c < 0 || (c == 0 && a > b);
}

static void sift_down(const run_t *runs, int *heap, int n, int i) {
    int top = heap[i];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = l;
        if (l >= n) break;
        if (r < n && run_before(runs, heap[r], heap[l])) m = r;
        if (!run_before(runs, heap[m], top)) break;
        heap[i] = heap[m];
        i = m;
    }
    heap[i] = top;
}

/* merge_newest(keys_lists, values_lists, starts, ends) -> (keys, values)
 * Runs are given oldest first; each run's keys [start, end) are strictly increasing.
 * Every key once, with the value of the newest run that holds it. */
static PyObject *merge_newest(PyObject *self, PyObject *args) {
    PyObject *kls, *vls, *starts, *ends;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyList_Type, &kls, &PyList_Type, &vls, &PyList_Type, &starts,
                          &PyList_Type, &ends))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(kls);
    if (PyList_GET_SIZE(vls) != n || PyList_GET_SIZE(starts) != n || PyList_GET_SIZE(ends) != n || n > 1 << 20) {
        PyErr_SetString(PyExc_ValueError, "merge_newest: lists of different lengths");
        return NULL;
    }
    run_t *runs = PyMem_Malloc(sizeof(run_t) * (n ? n : 1));
    int *heap = PyMem_Malloc(sizeof(int) * (n ? n : 1));
    PyObject *result = NULL;
    pairs_t outp = {NULL, NULL, 0, 0};
    if (!runs || !heap) { PyErr_NoMemory(); goto done; }
    int h = 0;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        run_t *r = &runs[i];
        r->keys = PyList_GET_ITEM(kls, i);
        r->values = PyList_GET_ITEM(vls, i);
        r->pos = PyLong_AsSsize_t(PyList_GET_ITEM(starts, i));
        r->end = PyLong_AsSsize_t(PyList_GET_ITEM(ends, i));
        if (PyErr_Occurred()) goto done;
        if (!PyList_Check(r->keys) || !PyList_Check(r->values) || r->pos < 0 || r->end > PyList_GET_SIZE(r->keys) ||
            r->end > PyList_GET_SIZE(r->values)) {
            PyErr_SetString(PyExc_ValueError, "merge_newest: bad run");
            goto done;
        }
        if (all_bytes(r->keys, r->pos, r->end, "keys")) goto done;
        if (r->pos < r->end) {
            run_load(r);
            heap[h++] = (int)i;
            total += r->end - r->pos;
        }
    }
    if (pairs_init(&outp, total)) goto done;
    for (int i = h / 2 - 1; i >= 0; i--) sift_down(runs, heap, h, i);
    const char *last_k = NULL;
    Py_ssize_t last_len = -1;
    while (h) {
        run_t *r = &runs[heap[0]];
        /* the first of equal keys is the newest */
        if (r->klen != last_len || memcmp(r->k, last_k, last_len)) {
            pairs_put(&outp, PyList_GET_ITEM(r->keys, r->pos), PyList_GET_ITEM(r->values, r->pos));
            last_k = r->k;  /* the key object stays alive in the output list */
            last_len = r->klen;
        }
        if (++r->pos == r->end) {
            heap[0] = heap[--h];
        } else {
            run_load(r);
        }
        if (h) sift_down(runs, heap, h, 0);
    }
    if (pairs_cut(&outp)) goto done;
    result = PyTuple_Pack(2, outp.keys, outp.values);
done:
    pairs_drop(&outp);
    PyMem_Free(runs);
    PyMem_Free(heap);
    return result;
}

/* live(keys, values, put, unstaged) -> (keys, values)
 * Tagged staging values to what they stage: a value tagged `put` without its tag byte, an
 * `unstaged` mark left out (with its key), anything else (a tombstone) None. */
static PyObject *live(PyObject *self, PyObject *args) {
    PyObject *ks, *vs;
    int put, unstaged;
    if (!PyArg_ParseTuple(args, "O!O!ii", &PyList_Type, &ks, &PyList_Type, &vs, &put, &unstaged)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ks);
    if (PyList_GET_SIZE(vs) != n) {
        PyErr_SetString(PyExc_ValueError, "live: lists of different lengths");
        return NULL;
    }
    if (all_bytes(vs, 0, n, "values")) return NULL;
    PyObject *result = NULL;
    pairs_t outp;
    if (pairs_init(&outp, n)) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(vs, i);
        Py_ssize_t len = PyBytes_GET_SIZE(v);
        if (len < 1) {
            PyErr_SetString(PyExc_ValueError, "live: an untagged staging value");
            goto done;
        }
        int t = (unsigned char)PyBytes_AS_STRING(v)[0];
        if (t == unstaged) continue;
        if (t == put) {
            PyObject *u = PyBytes_FromStringAndSize(PyBytes_AS_STRING(v) + 1, len - 1);
            if (!u) goto done;
            pairs_put(&outp, PyList_GET_ITEM(ks, i), u);
            Py_DECREF(u);
        } else {
            pairs_put(&outp, PyList_GET_ITEM(ks, i), Py_None);
        }
    }
    if (pairs_cut(&outp)) goto done;
    result = PyTuple_Pack(2, outp.keys, outp.values);
done:
    pairs_drop(&outp);
    return result;
}

/* overlay(base_keys, base_values, keys, values) -> (keys, values, applied)
 * Sorted changes (value None: delete) over sorted base records: the records after the change,
 * and how many changes change something (a new key with a value, a base key whose value
 * differs or is deleted), as writer.apply's record loop counts them. */
static PyObject *overlay(PyObject *self, PyObject *args) {
    PyObject *bk, *bv, *ck, *cv;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyList_Type, &bk, &PyList_Type, &bv, &PyList_Type, &ck, &PyList_Type,
                          &cv))
        return NULL;
    Py_ssize_t nb = PyList_GET_SIZE(bk), nc = PyList_GET_SIZE(ck);
    if (PyList_GET_SIZE(bv) != nb || PyList_GET_SIZE(cv) != nc) {
        PyErr_SetString(PyExc_ValueError, "overlay: lists of different lengths");
        return NULL;
    }
    if (all_bytes(bk, 0, nb, "keys") || all_bytes(bv, 0, nb, "values") || all_bytes(ck, 0, nc, "keys")) return NULL;
    for (Py_ssize_t j = 0; j < nc; j++) {
        PyObject *v = PyList_GET_ITEM(cv, j);
        if (v != Py_None && !PyBytes_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "values must be bytes or None");
            return NULL;
        }
    }
    PyObject *result = NULL;
    pairs_t outp;
    if (pairs_init(&outp, nb + nc)) goto done;
    Py_ssize_t i = 0, j = 0, applied = 0;
    while (i < nb || j < nc) {
        int c = i == nb ? 1 : j == nc ? -1 : bytes_cmp(PyList_GET_ITEM(bk, i), PyList_GET_ITEM(ck, j));
        if (c < 0) {
            pairs_put(&outp, PyList_GET_ITEM(bk, i), PyList_GET_ITEM(bv, i));
            i++;
            continue;
        }
        PyObject *v = PyList_GET_ITEM(cv, j);
        if (c == 0) {
            PyObject *old = PyList_GET_ITEM(bv, i);
            if (v == Py_None || PyBytes_GET_SIZE(v) != PyBytes_GET_SIZE(old) ||
                memcmp(PyBytes_AS_STRING(v), PyBytes_AS_STRING(old), PyBytes_GET_SIZE(v)))
                applied++;
            i++;
        } else if (v != Py_None) {
            applied++;
        }
        if (v != Py_None) pairs_put(&outp, PyList_GET_ITEM(ck, j), v);
        j++;
    }
    if (pairs_cut(&outp)) goto done;
    result = Py_BuildValue("(OOn)", outp.keys, outp.values, applied);
done:
    pairs_drop(&outp);
    return result;
}

/* cut_ends(keys, hash, mask) -> [i + 1 for each key i with hash(key) & mask == 0] */
static PyObject *cut_ends(PyObject *self, PyObject *args) {
    PyObject *ks, *hash;
    unsigned long long mask;
    if (!PyArg_ParseTuple(args, "O!OK", &PyList_Type, &ks, &hash, &mask)) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ks); i++) {
        PyObject *h = PyObject_CallOneArg(hash, PyList_GET_ITEM(ks, i));
        if (!h) goto fail;
        unsigned long long v = PyLong_AsUnsignedLongLongMask(h);
        Py_DECREF(h);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) goto fail;
        if (!(v & mask)) {
            PyObject *e = PyLong_FromSsize_t(i + 1);
            if (!e) goto fail;
            int rc = PyList_Append(out, e);
            Py_DECREF(e);
            if (rc) goto fail;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* range_feed(keys, values, ident) -> (data, size)
 * data: for each record, its key's length (4 bytes little-endian), the key and the first
 * `ident` bytes of its value (what a range's content id hashes); size: the keys' and
 * values' lengths summed. */
static PyObject *range_feed(PyObject *self, PyObject *args) {
    PyObject *ks, *vs;
    Py_ssize_t ident;
    if (!PyArg_ParseTuple(args, "O!O!n", &PyList_Type, &ks, &PyList_Type, &vs, &ident)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ks);
    if (PyList_GET_SIZE(vs) != n || ident < 0) {
        PyErr_SetString(PyExc_ValueError, "range_feed: lists of different lengths");
        return NULL;
    }
    if (all_bytes(ks, 0, n, "keys") || all_bytes(vs, 0, n, "values")) return NULL;
    Py_ssize_t total = 0, size = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t kl = PyBytes_GET_SIZE(PyList_GET_ITEM(ks, i)), vl = PyBytes_GET_SIZE(PyList_GET_ITEM(vs, i));
        if (kl > 0xFFFFFFFFLL) {
            PyErr_SetString(PyExc_ValueError, "range_feed: key too long");
            return NULL;
        }
        total += 4 + kl + (vl < ident ? vl : ident);
        size += kl + vl;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, total);
    if (!data) return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(data);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(ks, i), *v = PyList_GET_ITEM(vs, i);
        Py_ssize_t kl = PyBytes_GET_SIZE(k), vl = PyBytes_GET_SIZE(v);
        if (vl > ident) vl = ident;
        p[0] = (unsigned char)kl; p[1] = (unsigned char)(kl >> 8);
        p[2] = (unsigned char)(kl >> 16); p[3] = (unsigned char)(kl >> 24);
        memcpy(p + 4, PyBytes_AS_STRING(k), kl);
        memcpy(p + 4 + kl, PyBytes_AS_STRING(v), vl);
        p += 4 + kl + vl;
    }
    PyObject *result = Py_BuildValue("(Nn)", data, size);
    return result;
}


/* ---- Writing a table ------------------------------------------------------------------------
 *
 * The layout is RocksDB's block-based table (legacy footer, no compression), as its format
 * documentation describes it:
 *   record   = varint32 shared, varint32 non_shared, varint32 value_len, key[shared:], value
 *   block    = records, uint32 restart offsets, uint32 restart count (all little-endian)
 *   trailer  = compression type byte (0: none), uint32 masked CRC-32C of block + type byte
 * Keys in data blocks are internal keys: the user key and an 8-byte trailer holding sequence
 * number 0 and type 1 (a value), as a file made for ingestion carries them.  A block is cut
 * before a record once it has reached block_size bytes.  The index block (restart interval 1)
 * has one record per data block: its last internal key, then its offset and size (varint64).
 * Then come the properties block (PROPS, sorted by name), the meta-index block (restart
 * interval 1, one record: "rocksdb.properties" and that block's handle) and the footer:
 * checksum type (1: CRC-32C), the meta-index's and the index's handles, zeros up to byte 41,
 * uint32 format_version, uint64 magic number.
 */

static const unsigned char KEY_TRAILER[8] = {1, 0, 0, 0, 0, 0, 0, 0};

static uint32_t crc_table[256];

static void crc_table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int b = 0; b < 8; b++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));  /* Castagnoli, reflected */
        crc_table[i] = c;
    }
}

static uint32_t crc32c_soft(uint32_t crc, const unsigned char *p, size_t n) {
    while (n--) crc = (crc >> 8) ^ crc_table[(crc ^ *p++) & 0xFF];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CRC_HW 1
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
static int crc_hw;
#endif

/* CRC-32C of p[0:n], pre- and post-inverted as usual, then masked as RocksDB stores it. */
static uint32_t block_crc(const unsigned char *p, size_t n) {
    uint32_t c;
#ifdef HAVE_CRC_HW
    if (crc_hw) c = ~crc32c_hw(0xFFFFFFFFu, p, n);
    else
#endif
        c = ~crc32c_soft(0xFFFFFFFFu, p, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

static inline unsigned char *put_varint(unsigned char *o, uint64_t v) {
    while (v >= 0x80) {
        *o++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *o++ = (unsigned char)v;
    return o;
}

static inline unsigned char *put_u32(unsigned char *o, uint32_t v) {
    o[0] = (unsigned char)v; o[1] = (unsigned char)(v >> 8); o[2] = (unsigned char)(v >> 16); o[3] = (unsigned char)(v >> 24);
    return o + 4;
}

/* Byte i of an internal key (user key k of length n, then KEY_TRAILER). */
static inline unsigned char ikey_at(const unsigned char *k, Py_ssize_t n, Py_ssize_t i) {
    return i < n ? k[i] : KEY_TRAILER[i - n];
}

/* The common prefix of two internal keys, given their user keys. */
static Py_ssize_t ikey_shared(const unsigned char *a, Py_ssize_t na, const unsigned char *b, Py_ssize_t nb) {
    Py_ssize_t m = na < nb ? na : nb, i = 0;
    while (i < m && a[i] == b[i]) i++;
    if (i < m) return i;
    Py_ssize_t end = (na < nb ? na : nb) + 8;
    while (i < end && ikey_at(a, na, i) == ikey_at(b, nb, i)) i++;
    return i;
}

/* Closes the block begun at `start` (its records end at `o`): restarts, count, trailer. */
static unsigned char *end_block(unsigned char *start, unsigned char *o, const uint32_t *restarts, Py_ssize_t nr) {
    for (Py_ssize_t r = 0; r < nr; r++) o = put_u32(o, restarts[r]);
    o = put_u32(o, (uint32_t)nr);
    *o++ = 0;  /* no compression */
    o = put_u32(o, block_crc(start, (size_t)(o - start)));
    return o;
}

/* Closes the data block begun at `start` whose last record is record `last`, and notes for the
 * index block its (offset, size without the trailer, last record) in `noted`. */
static unsigned char *end_data_block(unsigned char *base, unsigned char *start, unsigned char *o, const uint32_t *restarts,
                                     Py_ssize_t nr, Py_ssize_t *noted, Py_ssize_t last) {
    o = end_block(start, o, restarts, nr);
    noted[0] = start - base;
    noted[1] = (o - start) - 5;
    noted[2] = last;
    return o;
}

/* The properties block's records, sorted by name: raw bytes, or (number >= 0) a varint64 of
 * numbers[number] in encode_table (1 data size, 2 index size, 3 data blocks, 4 records,
 * 5 internal keys' bytes, 6 values' bytes; 0 is zero). */
static const struct {
    const char *name;
    const char *raw;
    size_t raw_len;
    int number;
} PROPS[] = {
    {"rocksdb.block.based.table.index.type", "\0\0\0\0", 4, -1},  /* uint32 0: binary search */
    {"rocksdb.block.based.table.prefix.filtering", "0", 1, -1},
    {"rocksdb.block.based.table.whole.key.filtering", "1", 1, -1},
    {"rocksdb.comparator", "leveldb.BytewiseComparator", 26, -1},
    {"rocksdb.compression", "NoCompression", 13, -1},
    {"rocksdb.data.size", NULL, 0, 1},
    {"rocksdb.deleted.keys", NULL, 0, 0},
    {"rocksdb.external_sst_file.global_seqno", "\0\0\0\0\0\0\0\0", 8, -1},  /* uint64 0 */
    {"rocksdb.external_sst_file.version", "\2\0\0\0", 4, -1},  /* uint32 2 */
    {"rocksdb.filter.size", NULL, 0, 0},
    {"rocksdb.fixed.key.length", NULL, 0, 0},
    {"rocksdb.format.version", NULL, 0, 0},
    {"rocksdb.index.key.is.user.key", NULL, 0, 0},
    {"rocksdb.index.size", NULL, 0, 2},
    {"rocksdb.index.value.is.delta.encoded", NULL, 0, 0},
    {"rocksdb.key.largest.seqno", NULL, 0, 0},
    {"rocksdb.merge.operands", NULL, 0, 0},
    {"rocksdb.merge.operator", "nullptr", 7, -1},
    {"rocksdb.num.data.blocks", NULL, 0, 3},
    {"rocksdb.num.entries", NULL, 0, 4},
    {"rocksdb.num.range-deletions", NULL, 0, 0},
    {"rocksdb.prefix.extractor.name", "nullptr", 7, -1},
    {"rocksdb.property.collectors", "[]", 2, -1},
    {"rocksdb.raw.key.size", NULL, 0, 5},
    {"rocksdb.raw.value.size", NULL, 0, 6},
};
#define TAIL_BOUND 4096  /* properties, meta-index and footer together stay well below */

/* A record of a restart-interval-1 block (properties, meta-index), its key whole. */
static unsigned char *put_whole(unsigned char *o, const unsigned char *start, uint32_t *restarts, Py_ssize_t *nr,
                                const char *k, size_t kl, const unsigned char *v, size_t vl) {
    restarts[(*nr)++] = (uint32_t)(o - start);
    o = put_varint(o, 0);
    o = put_varint(o, kl);
    o = put_varint(o, vl);
    memcpy(o, k, kl);
    o += kl;
    memcpy(o, v, vl);
    return o + vl;
}

static PyObject *encode_table(PyObject *self, PyObject *args) {
    PyObject *ks, *vs;
    Py_ssize_t block_size, interval;
    unsigned int format_version;
    if (!PyArg_ParseTuple(args, "O!O!nnI", &PyList_Type, &ks, &PyList_Type, &vs, &block_size, &interval, &format_version))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ks);
    if (PyList_GET_SIZE(vs) != n || interval < 1 || block_size < 1) {
        PyErr_SetString(PyExc_ValueError, "encode_table: lists of different lengths or a bad block shape");
        return NULL;
    }
    if (!n) {
        PyErr_SetString(PyExc_ValueError, "encode_table: a table needs at least one record");
        return NULL;
    }
    if (all_bytes(ks, 0, n, "keys") || all_bytes(vs, 0, n, "values")) return NULL;
    /* An upper bound of the output: per record 3 varints (<= 5 bytes each), its internal key and
     * value, a restart (<= one per record), and, were every record a block of its own, that
     * block's restart count and trailer and its index record (key, 3 varints, a handle of <= 20
     * bytes, a restart), and the tail (properties, meta-index, footer). */
    Py_ssize_t bound = 64 + TAIL_BOUND, raw_keys = 0, raw_values = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t kl = PyBytes_GET_SIZE(PyList_GET_ITEM(ks, i)), vl = PyBytes_GET_SIZE(PyList_GET_ITEM(vs, i));
        if (kl > 0x7FFFFFF0 || vl > 0x7FFFFFF0) {
            PyErr_SetString(PyExc_ValueError, "encode_table: a key or value too long");
            return NULL;
        }
        raw_keys += kl + 8;
        raw_values += vl;
        bound += 2 * (kl + 8) + vl + 15 + 4 + 4 + 5 + 15 + 20 + 4;
    }
    PyObject *body = PyBytes_FromStringAndSize(NULL, bound);
    /* a block's restarts, or the index's, or the properties' */
    uint32_t *restarts = PyMem_Malloc(sizeof(uint32_t) * (size_t)(n + 1 > 32 ? n + 1 : 32));
    /* Each data block's (offset, size, index of its last record), for the index block. */
    Py_ssize_t *blocks = PyMem_Malloc(sizeof(Py_ssize_t) * 3 * (size_t)n);
    PyObject *result = NULL;
    if (!body || !restarts || !blocks) {
        PyErr_NoMemory();
        goto done;
    }
    unsigned char *base = (unsigned char *)PyBytes_AS_STRING(body), *o = base, *start = base;
    Py_ssize_t nb = 0, nr = 0, count = 0;
    const unsigned char *prev = NULL;
    Py_ssize_t prev_len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(ks, i), *v = PyList_GET_ITEM(vs, i);
        const unsigned char *kp = (const unsigned char *)PyBytes_AS_STRING(k);
        Py_ssize_t kl = PyBytes_GET_SIZE(k), vl = PyBytes_GET_SIZE(v);
        if (prev) {
            Py_ssize_t m = prev_len < kl ? prev_len : kl;
            int c = memcmp(prev, kp, (size_t)m);
            if (c > 0 || (c == 0 && prev_len >= kl)) {
                PyErr_SetString(PyExc_ValueError, "encode_table: keys must be strictly increasing");
                goto done;
            }
        }
        if (count && (o - start) + 4 * nr + 4 >= block_size) {
            o = end_data_block(base, start, o, restarts, nr, blocks + 3 * nb++, i - 1);
            start = o;
            count = nr = 0;
        }
        Py_ssize_t shared = 0;
        if (count % interval == 0) restarts[nr++] = (uint32_t)(o - start);
        else shared = ikey_shared(prev, prev_len, kp, kl);
        o = put_varint(o, (uint64_t)shared);
        o = put_varint(o, (uint64_t)(kl + 8 - shared));
        o = put_varint(o, (uint64_t)vl);
        if (shared < kl) {
            memcpy(o, kp + shared, (size_t)(kl - shared));
            o += kl - shared;
            memcpy(o, KEY_TRAILER, 8);
            o += 8;
        } else {
            memcpy(o, KEY_TRAILER + (shared - kl), (size_t)(kl + 8 - shared));
            o += kl + 8 - shared;
        }
        memcpy(o, PyBytes_AS_STRING(v), (size_t)vl);
        o += vl;
        prev = kp;
        prev_len = kl;
        count++;
    }
    o = end_data_block(base, start, o, restarts, nr, blocks + 3 * nb++, n - 1);
    /* The index block: one restart per record, so no record shares a prefix. */
    start = o;
    for (Py_ssize_t b = 0; b < nb; b++) {
        PyObject *k = PyList_GET_ITEM(ks, blocks[3 * b + 2]);
        Py_ssize_t kl = PyBytes_GET_SIZE(k);
        unsigned char handle[20], *h = put_varint(handle, (uint64_t)blocks[3 * b]);
        h = put_varint(h, (uint64_t)blocks[3 * b + 1]);
        restarts[b] = (uint32_t)(o - start);
        o = put_varint(o, 0);
        o = put_varint(o, (uint64_t)(kl + 8));
        o = put_varint(o, (uint64_t)(h - handle));
        memcpy(o, PyBytes_AS_STRING(k), (size_t)kl);
        o += kl;
        memcpy(o, KEY_TRAILER, 8);
        o += 8;
        memcpy(o, handle, (size_t)(h - handle));
        o += h - handle;
    }
    o = end_block(start, o, restarts, nb);
    uint64_t index_off = (uint64_t)(start - base), index_size = (uint64_t)(o - start) - 5;
    uint64_t numbers[] = {0, index_off, index_size + 5, (uint64_t)nb, (uint64_t)n, (uint64_t)raw_keys, (uint64_t)raw_values};
    start = o;
    nr = 0;
    for (size_t i = 0; i < sizeof(PROPS) / sizeof(PROPS[0]); i++) {
        unsigned char num[10];
        const unsigned char *v = (const unsigned char *)PROPS[i].raw;
        size_t vl = PROPS[i].raw_len;
        if (PROPS[i].number >= 0) {
            v = num;
            vl = (size_t)(put_varint(num, numbers[PROPS[i].number]) - num);
        }
        o = put_whole(o, start, restarts, &nr, PROPS[i].name, strlen(PROPS[i].name), v, vl);
    }
    o = end_block(start, o, restarts, nr);
    uint64_t props_off = (uint64_t)(start - base), props_size = (uint64_t)(o - start) - 5;
    unsigned char handle[20], *h = put_varint(put_varint(handle, props_off), props_size);
    start = o;
    nr = 0;
    o = put_whole(o, start, restarts, &nr, "rocksdb.properties", 18, handle, (size_t)(h - handle));
    o = end_block(start, o, restarts, nr);
    unsigned char *footer = o;
    *o++ = 1;  /* CRC-32C */
    o = put_varint(o, (uint64_t)(start - base));
    o = put_varint(o, (uint64_t)(footer - start) - 5);
    o = put_varint(o, index_off);
    o = put_varint(o, index_size);
    memset(o, 0, (size_t)(footer + 41 - o));
    o = put_u32(footer + 41, format_version);
    o = put_u32(o, 0x85F4CFF7u);  /* the magic number 0x88E241B785F4CFF7, little-endian */
    o = put_u32(o, 0x88E241B7u);
    if (_PyBytes_Resize(&body, o - base)) goto done;  /* body is NULL (and freed) on failure */
    result = body;
    body = NULL;
done:
    Py_XDECREF(body);
    PyMem_Free(restarts);
    PyMem_Free(blocks);
    return result;
}

/* bloom_bits(digests, size, probes): the bit array of a staging file's bloom filter (bloom.py) of
 * ``size`` bytes, m = 8 * size bits, over the keys whose xxh3-128 digests (16 bytes each, big-endian:
 * the high half, then the low) are concatenated in ``digests``: for each, probes (low mod m +
 * i * (high mod m)) mod m, i < probes, bit p of byte p / 8 (little bit order).  numpy's dozen calls
 * per filter, and a Python loop for a few keys, cost more than the hashing. */
static PyObject *bloom_bits(PyObject *self, PyObject *args) {
    Py_buffer d;
    Py_ssize_t size;
    int probes;
    if (!PyArg_ParseTuple(args, "y*ni", &d, &size, &probes)) return NULL;
    if (size <= 0 || size > ((Py_ssize_t)1 << 48) || probes < 0 || d.len % 16) {
        PyBuffer_Release(&d);
        PyErr_SetString(PyExc_ValueError, "bloom_bits: bad size, probe count or digests");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) {
        PyBuffer_Release(&d);
        return NULL;
    }
    unsigned char *bits = (unsigned char *)PyBytes_AS_STRING(out);
    memset(bits, 0, (size_t)size);
    const unsigned char *p = (const unsigned char *)d.buf;
    uint64_t m = (uint64_t)size * 8;
    for (Py_ssize_t off = 0; off < d.len; off += 16) {
        uint64_t high = 0, low = 0;
        for (int b = 0; b < 8; b++) {
            high = (high << 8) | p[off + b];
            low = (low << 8) | p[off + 8 + b];
        }
        /* (first + i * step) mod m, stepped: both are below m, so one subtraction keeps it there. */
        uint64_t bit = low % m, step = high % m;
        for (int i = 0; i < probes; i++) {
            bits[bit >> 3] |= (unsigned char)(1u << (bit & 7));
            bit += step;
            if (bit >= m) bit -= m;
        }
    }
    PyBuffer_Release(&d);
    return out;
}

static PyMethodDef methods[] = {
    {"decode_block", decode_block, METH_VARARGS, "Decode one SSTable block into (keys, values)."},
    {"merge_newest", merge_newest, METH_VARARGS, "Merge sorted runs (oldest first); the newest record of a key wins."},
    {"live", live, METH_VARARGS, "Tagged staging values to staged values (None: tombstone), unstaged marks dropped."},
    {"overlay", overlay, METH_VARARGS, "Sorted changes over sorted base records: (keys, values, applied)."},
    {"cut_ends", cut_ends, METH_VARARGS, "The indices just past each key whose hash has the masked bits zero."},
    {"range_feed", range_feed, METH_VARARGS, "What a range's content id hashes for these records, and their size."},
    {"encode_table", encode_table, METH_VARARGS, "The SSTable holding these records (keys strictly increasing)."},
    {"bloom_bits", bloom_bits, METH_VARARGS, "A staging bloom filter's bit array from its keys' xxh3-128 digests."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sstblock", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sstblock(void) {
    crc_table_init();
#ifdef HAVE_CRC_HW
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
    return PyModule_Create(&module);
}
