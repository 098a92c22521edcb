#!/usr/bin/env python3
"""Helpers for make-seeds.sh.

Subcommands:
  tree-extras DIR         add extended attributes, a socket, a fragmented
                          file and a directory large enough for a two-level
                          htree to a copy of the fixture tree
  tree-times DIR          print debugfs commands that give every inode of
                          DIR fixed atime, mtime and ctime
  journal-ops MNT [--fsync]
                          create, write, fallocate, rename and delete files
                          on a mounted image, with a sync after each step
  journal-canon IMG       make the journal of an image copied while mounted
                          reproducible: kernel-written times, new inodes'
                          generations and the commit times get fixed
                          values, and every journal checksum is recomputed
  journal-summary IMG     print the journal block types found in the log
  extract IMGDIR OUTDIR   write the seed corpora
"""

import hashlib
import os
import random
import re
import socket
import struct
import sys

FIXTURE_TIME = 1700000000
CANON_TIME = 1700003600

# ---------------------------------------------------------------------------
# Checksums


def _table(poly, reflected):
    t = []
    for i in range(256):
        if reflected:
            c = i
            for _ in range(8):
                c = (c >> 1) ^ poly if c & 1 else c >> 1
        else:
            c = i << 24
            for _ in range(8):
                c = ((c << 1) ^ poly) if c & 0x80000000 else (c << 1)
                c &= 0xFFFFFFFF
        t.append(c)
    return t


_CRC32C = _table(0x82F63B78, True)
_CRC32BE = _table(0x04C11DB7, False)


def crc32c(crc, data):
    """crc32c with the seed as register value and no final inversion."""
    t = _CRC32C
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def crc32_be(crc, data):
    t = _CRC32BE
    for b in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ t[((crc >> 24) ^ b) & 0xFF]
    return crc


def le16(b, o):
    return struct.unpack_from("<H", b, o)[0]


def le32(b, o):
    return struct.unpack_from("<I", b, o)[0]


def be16(b, o):
    return struct.unpack_from(">H", b, o)[0]


def be32(b, o):
    return struct.unpack_from(">I", b, o)[0]


def warn(msg):
    print("make-seeds: " + msg, file=sys.stderr)


# ---------------------------------------------------------------------------
# ext2/3/4 reader

EXTENTS_FL = 0x80000
INLINE_DATA_FL = 0x10000000
INCOMPAT_64BIT = 0x80
INCOMPAT_CSUM_SEED = 0x2000
RO_COMPAT_METADATA_CSUM = 0x400
S_IFMT = 0o170000
S_IFREG = 0o100000


class Fs:
    def __init__(self, path, write=False):
        self.path = path
        self.fd = os.open(path, os.O_RDWR if write else os.O_RDONLY)
        sb = self.pread(1024, 1024)
        if le16(sb, 0x38) != 0xEF53:
            raise ValueError(path + ": no ext2 superblock")
        self.sb = sb
        self.bs = 1024 << le32(sb, 0x18)
        self.first_data_block = le32(sb, 0x14)
        self.bpg = le32(sb, 0x20)
        self.ipg = le32(sb, 0x28)
        self.inode_size = le16(sb, 0x58) if le32(sb, 0x4C) >= 1 else 128
        self.incompat = le32(sb, 0x60)
        self.ro_compat = le32(sb, 0x64)
        self.is64 = bool(self.incompat & INCOMPAT_64BIT)
        self.desc_size = le16(sb, 0xFE) if self.is64 else 32
        blocks = le32(sb, 0x04) | ((le32(sb, 0x150) << 32) if self.is64 else 0)
        self.blocks_count = blocks
        self.groups = -(-(blocks - self.first_data_block) // self.bpg)
        self.metadata_csum = bool(self.ro_compat & RO_COMPAT_METADATA_CSUM)
        if self.incompat & INCOMPAT_CSUM_SEED:
            self.csum_seed = le32(sb, 0x270)
        else:
            self.csum_seed = crc32c(0xFFFFFFFF, sb[0x68:0x78])
        self.gdt = self.pread((self.first_data_block + 1) * self.bs,
                              self.groups * self.desc_size)
        self.itable_blocks = -(-(self.ipg * self.inode_size) // self.bs)

    def close(self):
        os.close(self.fd)

    def pread(self, off, n):
        b = os.pread(self.fd, n, off)
        if len(b) < n:
            b += bytes(n - len(b))
        return b

    def pwrite(self, off, data):
        os.pwrite(self.fd, data, off)

    def block(self, n):
        return self.pread(n * self.bs, self.bs)

    def desc(self, g):
        return self.gdt[g * self.desc_size:(g + 1) * self.desc_size]

    def inode_table(self, g):
        d = self.desc(g)
        lo = le32(d, 0x08)
        hi = le32(d, 0x28) if self.desc_size >= 64 else 0
        return (hi << 32) | lo

    def inode(self, ino):
        g, i = divmod(ino - 1, self.ipg)
        return self.pread(self.inode_table(g) * self.bs + i * self.inode_size,
                          self.inode_size)

    def itable_lookup(self, blk):
        """(group, first index) if blk is an inode table block."""
        for g in range(self.groups):
            t = self.inode_table(g)
            if t <= blk < t + self.itable_blocks:
                return g, (blk - t) * self.bs // self.inode_size
        return None

    # -- block mapping -----------------------------------------------------

    def extent_tree(self, node, depth_nodes, out, level=0):
        """Walks an extent node; appends (lblk, len, pblk, uninit) to out and
        (pblk, depth) of tree blocks to depth_nodes."""
        if le16(node, 0) != 0xF30A or level > 8:
            return
        entries = le16(node, 2)
        depth = le16(node, 6)
        for i in range(entries):
            o = 12 * (i + 1)
            if o + 12 > len(node):
                break
            if depth == 0:
                raw = le16(node, o + 4)
                start = (le16(node, o + 6) << 32) | le32(node, o + 8)
                ln = raw - 32768 if raw > 32768 else raw
                out.append((le32(node, o), ln, start, raw > 32768))
            else:
                leaf = (le16(node, o + 8) << 32) | le32(node, o + 4)
                if leaf >= self.blocks_count:
                    continue
                child = self.block(leaf)
                depth_nodes.append((leaf, le16(child, 6)))
                self.extent_tree(child, depth_nodes, out, level + 1)

    def mapping(self, inode):
        """(list of (lblk, pblk) pairs, list of (metadata block, kind))."""
        flags = le32(inode, 0x20)
        size = le32(inode, 0x04) | (le32(inode, 0x6C) << 32)
        nblocks = -(-size // self.bs)
        pairs, meta = [], []
        if flags & INLINE_DATA_FL:
            return pairs, meta
        ib = inode[0x28:0x28 + 60]
        if flags & EXTENTS_FL:
            out, nodes = [], []
            self.extent_tree(ib, nodes, out)
            for lblk, ln, start, _ in out:
                for k in range(ln):
                    pairs.append((lblk + k, start + k))
            meta = [(b, "extent-%d" % d) for b, d in nodes]
            return pairs, meta
        per = self.bs // 4
        words = struct.unpack("<15I", ib)

        def walk(blk, level, base):
            if blk == 0 or blk >= self.blocks_count:
                return
            meta.append((blk, ("ind", "dind", "tind")[level - 1]))
            ptrs = struct.unpack("<%dI" % per, self.block(blk))
            span = per ** (level - 1)
            for i, p in enumerate(ptrs):
                lb = base + i * span
                if lb >= nblocks:
                    break
                if level == 1:
                    if p:
                        pairs.append((lb, p))
                else:
                    walk(p, level - 1, lb)

        for i in range(12):
            if i < nblocks and words[i]:
                pairs.append((i, words[i]))
        walk(words[12], 1, 12)
        walk(words[13], 2, 12 + per)
        walk(words[14], 3, 12 + per + per * per)
        return pairs, meta

    def file_blocks(self, inode):
        pairs, _ = self.mapping(inode)
        return [p for _, p in sorted(pairs)]

    # -- directories -------------------------------------------------------

    @staticmethod
    def dir_entries(data, base=0):
        pos, out = base, []
        while pos + 8 <= len(data):
            ino, rl, nl = struct.unpack_from("<IHB", data, pos)
            if rl < 8 or pos + rl > len(data):
                break
            if ino and nl:
                out.append((data[pos + 8:pos + 8 + nl], ino))
            pos += rl
        return out

    def inline_xattrs(self, inode):
        """name -> value of the in-inode attributes."""
        res = {}
        if self.inode_size <= 128:
            return res
        start = 128 + le16(inode, 0x80)
        area = inode[start:]
        if len(area) < 4 or le32(area, 0) != 0xEA020000:
            return res
        body = area[4:]
        pos = 0
        while pos + 16 <= len(body) and le32(body, pos) != 0:
            nl, idx, voff, _, vsize = struct.unpack_from("<BBHII", body, pos)
            name = bytes(body[pos + 16:pos + 16 + nl])
            res[(idx, name)] = bytes(body[voff:voff + vsize])
            pos += (16 + nl + 3) & ~3
        return res

    def listdir(self, ino):
        inode = self.inode(ino)
        if le32(inode, 0x20) & INLINE_DATA_FL:
            ib = inode[0x28:0x28 + 60]
            ents = self.dir_entries(ib, 4)
            extra = self.inline_xattrs(inode).get((7, b"data"), b"")
            ents += self.dir_entries(extra)
            return ents
        ents = []
        for b in self.file_blocks(inode):
            ents += self.dir_entries(self.block(b))
        return ents

    def lookup(self, path):
        ino = 2
        for comp in [c for c in path.split("/") if c]:
            found = None
            for name, child in self.listdir(ino):
                if name == comp.encode():
                    found = child
                    break
            if found is None:
                return None
            ino = found
        return ino


# ---------------------------------------------------------------------------
# Tree preparation


def prng(seed, n):
    r = random.Random(seed)
    return bytes(r.getrandbits(8) for _ in range(n))


def posix_acl(entries):
    """Builds the VFS posix_acl_xattr value: version 2, then tag/perm/id."""
    out = struct.pack("<I", 2)
    for tag, perm, ident in entries:
        out += struct.pack("<HHI", tag, perm, ident)
    return out


def tree_extras(d):
    set_ = os.setxattr
    undefined = 0xFFFFFFFF
    set_(d + "/files/size-100", "user.comment", b"fixture file with one small attribute")
    for n in ("alpha", "beta", "gamma"):
        set_(d + "/files/size-0", "user." + n, n.encode() * 2)
    set_(d + "/files/size-0", "user.empty", b"")
    set_(d + "/links/original", "user.blob", prng(11, 600))
    set_(d + "/links/original", "user.small", b"1")
    for i in range(12):
        set_(d + "/files/size-4096", "user.attribute-number-%02d" % i,
             ("value %d" % i).encode() * 2)
    set_(d + "/files/size-1023", "security.seed", b"label")
    set_(d + "/dirs/d1", "trusted.note", b"directory attribute")
    os.setxattr(d + "/links/fast", "trusted.symlink", b"symlink attribute",
                follow_symlinks=False)
    acl = posix_acl([(0x01, 7, undefined), (0x02, 5, 1000), (0x04, 5, undefined),
                     (0x08, 1, 100), (0x10, 7, undefined), (0x20, 5, undefined)])
    set_(d + "/deep/a", "system.posix_acl_access", acl)
    set_(d + "/deep/a", "system.posix_acl_default", acl)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(d + "/special/socket")
    s.close()
    os.makedirs(d + "/seeds/long-names", exist_ok=True)
    # 400 separate data runs: an extent tree of depth 1 at 4 KiB and of
    # depth 2 at 1 KiB, and double indirect blocks on ext2/3.
    with open(d + "/seeds/fragmented", "wb") as f:
        for i in range(400):
            f.seek(i * 65536)
            f.write(prng(1000 + i, 4096))
        f.truncate(400 * 65536)
    # Long names fill 1 KiB blocks quickly: the rebuilt index of this
    # directory needs interior dx nodes at 1 KiB.
    for i in range(700):
        with open(d + "/seeds/long-names/%s-%04d" % ("n" * 190, i), "wb"):
            pass


def tree_times(d):
    seen = set()
    paths = [d]
    for root, dirs, files in os.walk(d):
        for n in sorted(dirs + files):
            paths.append(os.path.join(root, n))
    for p in paths:
        ino = os.lstat(p).st_ino
        if ino in seen:
            continue
        seen.add(ino)
        for field in ("atime", "mtime", "ctime"):
            print("sif <%d> %s @%d" % (ino, field, FIXTURE_TIME))


# ---------------------------------------------------------------------------
# Journal scenario


def journal_ops(mnt, fsync):
    wide = mnt + "/wide"
    names = ["%s/new-entry-with-a-long-name-%03d" % (wide, i) for i in range(150)]
    # 1: new files, some with data (the kernel allocates at write time).
    for i, n in enumerate(names):
        with open(n, "wb") as f:
            f.write(prng(i, (i * 97) % 700))
    os.sync()
    # 2: free directories, an extent tree or indirect blocks, and an
    # attribute block: every freed metadata block is revoked.
    for root, dirs, files in os.walk(mnt + "/dirs", topdown=False):
        for n in sorted(files):
            os.unlink(os.path.join(root, n))
        for n in sorted(dirs):
            os.rmdir(os.path.join(root, n))
    os.rmdir(mnt + "/dirs")
    os.unlink(mnt + "/seeds/fragmented")
    os.unlink(mnt + "/files/large-3m")
    os.unlink(mnt + "/links/original")
    os.unlink(mnt + "/links/second")
    os.unlink(mnt + "/deep/a/third")
    os.sync()
    # 3: delete half the new files, rename some, preallocate, truncate.
    for n in names[::2]:
        os.unlink(n)
    for i in range(1, 40, 2):
        os.rename(names[i], names[i] + ".renamed")
    fd = os.open(mnt + "/files/preallocated", os.O_CREAT | os.O_WRONLY, 0o644)
    os.posix_fallocate(fd, 0, 256 * 1024)
    os.close(fd)
    os.truncate(mnt + "/sparse/holes", 1 << 20)
    os.sync()
    if fsync:
        fd = os.open(mnt + "/files/size-100", os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"appended")
        os.fsync(fd)
        os.close(fd)
        fd = os.open(mnt + "/files/fast-committed", os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"fast commit")
        os.fsync(fd)
        os.close(fd)


# ---------------------------------------------------------------------------
# jbd2

JBD2_MAGIC = 0xC03B3998
JB_DESCRIPTOR, JB_COMMIT, JB_SB1, JB_SB2, JB_REVOKE = 1, 2, 3, 4, 5
JF_COMPAT_CHECKSUM = 0x1
JF_INCOMPAT_64BIT = 0x2
JF_INCOMPAT_CSUM_V2 = 0x8
JF_INCOMPAT_CSUM_V3 = 0x10
TAG_ESCAPE, TAG_SAME_UUID, TAG_LAST = 0x1, 0x2, 0x8


class Journal:
    def __init__(self, fs):
        self.fs = fs
        inode = fs.inode(le32(fs.sb, 0xE0) or 8)
        self.map = dict(fs.mapping(inode)[0])
        sb = self.read(0)
        if be32(sb, 0) != JBD2_MAGIC:
            raise ValueError("no journal superblock")
        self.sb = sb
        self.bs = be32(sb, 0x0C)
        self.maxlen = be32(sb, 0x10)
        self.first = be32(sb, 0x14)
        self.start = be32(sb, 0x1C)
        v2 = be32(sb, 4) == JB_SB2
        self.compat = be32(sb, 0x24) if v2 else 0
        self.incompat = be32(sb, 0x28) if v2 else 0
        self.num_fc = be32(sb, 0x54) if v2 and self.incompat & 0x20 else 0
        self.seed = crc32c(0xFFFFFFFF, sb[0x30:0x40])
        self.v3 = bool(self.incompat & JF_INCOMPAT_CSUM_V3)
        self.v2v3 = bool(self.incompat & (JF_INCOMPAT_CSUM_V2 | JF_INCOMPAT_CSUM_V3))

    def off(self, j):
        return self.map[j] * self.fs.bs

    def read(self, j):
        return self.fs.pread(self.off(j), self.fs.bs)

    def write(self, j, data):
        self.fs.pwrite(self.off(j), bytes(data))

    def tag_size(self):
        if self.v3:
            return 16
        sz = 12
        if self.incompat & JF_INCOMPAT_CSUM_V2:
            sz += 2
        return sz if self.incompat & JF_INCOMPAT_64BIT else sz - 4

    def tags(self, blk):
        ts = self.tag_size()
        end = self.bs - (4 if self.v2v3 else 0)
        pos, out = 12, []
        while pos + ts <= end:
            lo = be32(blk, pos)
            if self.v3:
                flags = be32(blk, pos + 4)
            else:
                flags = be16(blk, pos + 6)
            hi = be32(blk, pos + 8) if self.incompat & JF_INCOMPAT_64BIT else 0
            out.append((pos, (hi << 32) | lo, flags))
            pos += ts
            if not flags & TAG_SAME_UUID:
                pos += 16
            if flags & TAG_LAST:
                break
        return out

    def wrap(self, j):
        last = self.maxlen - self.num_fc
        return self.first + (j - last) if j >= last else j

    def transactions(self):
        """Follows the log from its start: a list of transactions, each a
        dict of sequence, descriptors [(j, [(tagpos, fsblk, flags, dataj)])],
        revokes [j] and commit j."""
        j = self.start or self.first
        seq = be32(self.sb, 0x18)
        txs, cur = [], None
        for _ in range(self.maxlen):
            b = self.read(j)
            if be32(b, 0) != JBD2_MAGIC or be32(b, 8) != seq:
                break
            kind = be32(b, 4)
            if cur is None:
                cur = {"seq": seq, "desc": [], "revoke": [], "commit": None}
            if kind == JB_DESCRIPTOR:
                tags = []
                dj = j
                for tpos, blk, flags in self.tags(b):
                    dj = self.wrap(dj + 1)
                    tags.append((tpos, blk, flags, dj))
                cur["desc"].append((j, tags))
                j = self.wrap(dj + 1)
            elif kind == JB_REVOKE:
                cur["revoke"].append(j)
                j = self.wrap(j + 1)
            elif kind == JB_COMMIT:
                cur["commit"] = j
                txs.append(cur)
                cur = None
                seq += 1
                j = self.wrap(j + 1)
            else:
                break
        return txs


def canon_inode(fs, ino, raw):
    """Gives kernel-written times and new inodes' generations fixed values;
    returns True if the inode changed (its checksum is then rewritten)."""
    b = bytearray(raw)
    extra = le16(b, 0x80) if len(b) > 128 else 0
    changed = False
    # (time offset, extra offset, extra_isize needed for the extra)
    times = [(0x08, 0x8C, 16), (0x0C, 0x84, 8), (0x10, 0x88, 12)]
    if extra >= 24:
        times.append((0x90, 0x94, 24))
    created = extra >= 24 and le32(b, 0x90) not in (0, FIXTURE_TIME)
    for off, xoff, need in times:
        v = le32(b, off)
        if v not in (0, FIXTURE_TIME, CANON_TIME) and v > 1000000000:
            struct.pack_into("<I", b, off, CANON_TIME)
            changed = True
        if extra >= need and le32(b, xoff) and le32(b, off) == CANON_TIME:
            struct.pack_into("<I", b, xoff, 0)
            changed = True
    if le32(b, 0x14) > 1000000000 and le32(b, 0x14) != CANON_TIME:
        struct.pack_into("<I", b, 0x14, CANON_TIME)
        changed = True
    if created and le32(b, 0x64):
        struct.pack_into("<I", b, 0x64, 0)
        changed = True
    if changed and fs.metadata_csum and le16(b, 0) != 0:
        has_hi = len(b) > 128 and extra >= 4
        c = crc32c(fs.csum_seed, struct.pack("<I", ino))
        c = crc32c(c, b[0x64:0x68])
        c = crc32c(c, bytes(b[:0x7C]) + b"\0\0")
        if has_hi:
            c = crc32c(c, bytes(b[0x7E:0x82]) + b"\0\0" + bytes(b[0x84:]))
        else:
            c = crc32c(c, bytes(b[0x7E:]))
        struct.pack_into("<H", b, 0x7C, c & 0xFFFF)
        if has_hi:
            struct.pack_into("<H", b, 0x82, c >> 16)
    return bytes(b), changed


def canon_superblock(raw, metadata_csum):
    """Fixed mount and write times, mount point and write counter."""
    b = bytearray(raw)
    for off, hi in ((0x2C, 0x275), (0x30, 0x274)):
        if le32(b, off) not in (0, FIXTURE_TIME):
            struct.pack_into("<I", b, off, CANON_TIME)
            b[hi] = 0
    if le32(b, 0x178) or le32(b, 0x17C):
        struct.pack_into("<Q", b, 0x178, 4096)
    if any(b[0x88:0xC8]):
        b[0x88:0xC8] = b"/mnt".ljust(64, b"\0")
    if metadata_csum:
        struct.pack_into("<I", b, 0x3FC, crc32c(0xFFFFFFFF, bytes(b[:0x3FC])))
    return bytes(b)


def journal_canon(path):
    fs = Fs(path, write=True)
    j = Journal(fs)
    sb_block, sb_off = (1, 0) if fs.bs == 1024 else (0, 1024)
    ipb = fs.bs // fs.inode_size
    for tx in j.transactions():
        seq = tx["seq"]
        v1 = 0xFFFFFFFF
        for dj, tags in tx["desc"]:
            d = bytearray(j.read(dj))
            for tpos, blk, flags, dataj in tags:
                data = bytearray(j.read(dataj))
                if flags & TAG_ESCAPE:
                    struct.pack_into(">I", data, 0, JBD2_MAGIC)
                loc = fs.itable_lookup(blk)
                if loc:
                    g, first = loc
                    for k in range(ipb):
                        ino = g * fs.ipg + first + k + 1
                        o = k * fs.inode_size
                        new, ch = canon_inode(fs, ino, data[o:o + fs.inode_size])
                        if ch:
                            data[o:o + fs.inode_size] = new
                if blk == sb_block:
                    data[sb_off:sb_off + 1024] = canon_superblock(
                        data[sb_off:sb_off + 1024], fs.metadata_csum)
                escaped = be32(data, 0) == JBD2_MAGIC
                if escaped:
                    struct.pack_into(">I", data, 0, 0)
                flags = (flags | TAG_ESCAPE) if escaped else (flags & ~TAG_ESCAPE)
                if j.v3:
                    struct.pack_into(">I", d, tpos + 4, flags)
                else:
                    struct.pack_into(">H", d, tpos + 6, flags)
                j.write(dataj, data)
                if j.v2v3:
                    c = crc32c(j.seed, struct.pack(">I", seq))
                    c = crc32c(c, bytes(data))
                    if j.v3:
                        struct.pack_into(">I", d, tpos + 12, c)
                    else:
                        struct.pack_into(">H", d, tpos + 4, c & 0xFFFF)
            if j.v2v3:
                struct.pack_into(">I", d, j.bs - 4, 0)
                struct.pack_into(">I", d, j.bs - 4, crc32c(j.seed, bytes(d)))
            j.write(dj, d)
            if j.compat & JF_COMPAT_CHECKSUM:
                v1 = crc32_be(v1, bytes(d))
                for _, _, _, dataj in tags:
                    v1 = crc32_be(v1, j.read(dataj))
        for rj in tx["revoke"]:
            r = bytearray(j.read(rj))
            if j.v2v3:
                struct.pack_into(">I", r, j.bs - 4, 0)
                struct.pack_into(">I", r, j.bs - 4, crc32c(j.seed, bytes(r)))
            j.write(rj, r)
        cj = tx["commit"]
        c = bytearray(j.read(cj))
        struct.pack_into(">QI", c, 0x30, CANON_TIME, 0)
        if j.v2v3:
            struct.pack_into(">I", c, 0x10, 0)
            struct.pack_into(">I", c, 0x10, crc32c(j.seed, bytes(c)))
        elif j.compat & JF_COMPAT_CHECKSUM:
            struct.pack_into(">I", c, 0x10, v1)
        j.write(cj, c)
    fs.pwrite(1024, canon_superblock(fs.sb, fs.metadata_csum))
    fs.close()


def journal_summary(path):
    fs = Fs(path)
    j = Journal(fs)
    counts = {"descriptor": 0, "revoke": 0, "commit": 0, "tags": 0}
    txs = j.transactions()
    for tx in txs:
        counts["descriptor"] += len(tx["desc"])
        counts["tags"] += sum(len(t) for _, t in tx["desc"])
        counts["revoke"] += len(tx["revoke"])
        counts["commit"] += 1
    print("%s: %d transactions, %d descriptor blocks (%d tags), %d revoke blocks, "
          "%d commit blocks; journal features compat 0x%x incompat 0x%x" % (
              os.path.basename(path), len(txs), counts["descriptor"], counts["tags"],
              counts["revoke"], counts["commit"], j.compat, j.incompat))
    fs.close()


# ---------------------------------------------------------------------------
# Seed extraction


class Corpus:
    def __init__(self):
        self.seeds = {}

    def add(self, target, name, data):
        if data is None or len(data) == 0:
            return
        data = bytes(data)
        lst = self.seeds.setdefault(target, [])
        h = hashlib.sha1(data).digest()
        for n, d, dh in lst:
            if dh == h or n == name:
                return
        lst.append((name, data, h))

    def write(self, out):
        hexname = re.compile(r"^[0-9a-f]{40}$")
        for target in sorted(self.seeds):
            d = os.path.join(out, target)
            os.makedirs(d, exist_ok=True)
            for n in os.listdir(d):
                if not hexname.match(n):
                    os.unlink(os.path.join(d, n))
            for name, data, _ in self.seeds[target]:
                with open(os.path.join(d, name), "wb") as f:
                    f.write(data)


class Image:
    """One image opened for extraction, with path helpers that skip
    quietly over paths an image does not have."""

    def __init__(self, corpus, path, tag):
        self.c = corpus
        self.fs = Fs(path)
        self.tag = tag

    def ino(self, path):
        if isinstance(path, int):
            return path
        return self.fs.lookup(path)

    def inode(self, path):
        ino = self.ino(path)
        return None if ino is None else self.fs.inode(ino)

    def add(self, target, what, data):
        self.c.add(target, "%s-%s" % (self.tag, what), data)

    def add_inode(self, path, what):
        self.add("inode", what, self.inode(path))

    def iblock(self, path):
        i = self.inode(path)
        return None if i is None else i[0x28:0x28 + 60]

    def dir_block(self, path, index):
        i = self.inode(path)
        if i is None:
            return None
        blocks = self.fs.file_blocks(i)
        if not blocks:
            return None
        return self.fs.block(blocks[index])

    def xattr_block(self, path):
        i = self.inode(path)
        if i is None:
            return None
        blk = le32(i, 0x68) | ((le16(i, 0x76) << 32) if self.fs.is64 else 0)
        return self.fs.block(blk) if blk else None

    def xattr_area(self, path):
        i = self.inode(path)
        if i is None or len(i) <= 128:
            return None
        area = i[128 + le16(i, 0x80):]
        return area if len(area) >= 4 else None

    def extent_blocks(self, path):
        i = self.inode(path)
        if i is None or not le32(i, 0x20) & EXTENTS_FL:
            return []
        return self.fs.mapping(i)[1]


def add_common(im):
    """Seeds every image gives."""
    fs = im.fs
    im.add("superblock", "superblock", fs.sb)
    flags_seen = set()
    for g in range(fs.groups):
        d = fs.desc(g)
        if g in (0, 1, fs.groups - 1) or le16(d, 0x12) not in flags_seen:
            im.add("group_desc", "group-%d-desc" % g, d)
        flags_seen.add(le16(d, 0x12))
    im.add_inode(2, "root-inode")
    im.add("dirblock", "root-dir-block", im.dir_block(2, 0))


def dx_blocks(im, path):
    """(root block, [interior node blocks]) of an indexed directory."""
    i = im.inode(path)
    if i is None or not le32(i, 0x20) & 0x1000:
        return None, []
    blocks = im.fs.file_blocks(i)
    root = im.fs.block(blocks[0])
    nodes = []
    levels = root[0x1E]
    if levels:
        info_len = root[0x1D]
        off = 0x18 + info_len
        count = le16(root, off + 2)
        for k in range(count):
            lb = le32(root, off + 8 * k + 4)
            if lb < len(blocks):
                nodes.append(im.fs.block(blocks[lb]))
    return root, nodes


def extract(imgdir, out):
    c = Corpus()

    def img(name, tag=None):
        p = os.path.join(imgdir, name + ".img")
        if not os.path.exists(p):
            warn("missing image " + p)
            return None
        return Image(c, p, tag or name)

    # -- images as mke2fs -d wrote them --------------------------------------
    ext4 = img("ext4")
    if ext4:
        add_common(ext4)
        fs = ext4.fs
        c.add("superblock", "ext4-backup-superblock-group-1",
              fs.pread((fs.bpg * 1) * fs.bs, 1024))
        for path, what in [(8, "journal-inode"), (7, "resize-inode"),
                           (11, "lost-found-inode"), ("files/size-0", "empty-file-xattrs-inode"),
                           ("files/size-100", "small-file-inode"),
                           ("files/large-3m", "large-file-inode"),
                           ("sparse/holes", "sparse-file-inode"),
                           ("sparse/empty-1g", "sparse-empty-1g-inode"),
                           ("seeds/fragmented", "fragmented-file-inode"),
                           ("links/fast", "fast-symlink-xattr-inode"),
                           ("links/slow", "slow-symlink-inode"),
                           ("special/fifo", "fifo-inode"), ("special/char", "chardev-inode"),
                           ("special/block", "blockdev-inode"),
                           ("special/socket", "socket-inode"),
                           ("links/original", "xattr-block-file-inode"),
                           ("deep/a", "acl-dir-inode"), ("wide", "wide-dir-inode")]:
            ext4.add_inode(path, what)
        ext4.add("extent", "empty-file-iblock", ext4.iblock("files/size-0"))
        ext4.add("extent", "one-extent-iblock", ext4.iblock("files/size-100"))
        ext4.add("extent", "large-file-iblock", ext4.iblock("files/large-3m"))
        ext4.add("extent", "sparse-file-iblock", ext4.iblock("sparse/holes"))
        ext4.add("extent", "dir-iblock", ext4.iblock("wide"))
        ext4.add("extent", "fragmented-index-iblock", ext4.iblock("seeds/fragmented"))
        eb = ext4.extent_blocks("seeds/fragmented")
        for k, (b, kind) in enumerate(eb):
            if k in (0, len(eb) - 1):
                ext4.add("extent", "fragmented-%s-block-%d" % (kind.replace("extent-", "depth"), k),
                         fs.block(b))
        for path, what in [("files", "files-dir-block"), ("names", "long-names-dir-block"),
                           ("special", "special-dir-block"), ("links", "links-dir-block"),
                           ("lost+found", "lost-found-dir-block")]:
            ext4.add("dirblock", what, ext4.dir_block(path, 0))
        ext4.add("dirblock", "lost-found-empty-dir-block", ext4.dir_block("lost+found", -1))
        ext4.add("dirblock", "wide-dir-last-block", ext4.dir_block("wide", -1))
        ext4.add("xattr", "xattr-block-600-byte-value", ext4.xattr_block("links/original"))
        ext4.add("xattr", "xattr-block-12-entries", ext4.xattr_block("files/size-4096"))
        ext4.add("xattr", "in-inode-xattrs-small", ext4.xattr_area("files/size-100"))
        ext4.add("xattr", "in-inode-xattrs-four-with-empty-value", ext4.xattr_area("files/size-0"))
        ext4.add("xattr", "in-inode-xattrs-acl", ext4.xattr_area("deep/a"))
        ext4.add("xattr", "in-inode-xattrs-security", ext4.xattr_area("files/size-1023"))
        ext4.add("xattr", "in-inode-xattrs-symlink-trusted", ext4.xattr_area("links/fast"))
        ext4.add("xattr", "in-inode-no-xattrs", ext4.xattr_area("files/size-60"))
        seed = fs.sb[0xEC:0xFC]
        names = [b"file-with-a-longer-name-1", "caf\u00e9".encode(), b"n" * 255,
                 b"odd name with spaces"]
        for v in range(6):
            for k, n in enumerate(names[:3]):
                c.add("dirhash", "ext4-seed-v%d-name-%d" % (v, k), bytes([v]) + seed + n)
        c.add("dirhash", "ext4-seed-v6-siphash", bytes([6]) + seed + names[3])
        for v in (1, 2):
            c.add("dirhash", "zero-seed-v%d" % v, bytes([v]) + bytes(16) + names[3])
        c.add("dirhash", "ext4-seed-v1-empty-name", bytes([1]) + seed)
        c.add("dirhash", "ext4-seed-v1-dot", bytes([1]) + seed + b".")

    ext2_1k = img("ext2-1k")
    if ext2_1k:
        add_common(ext2_1k)
        fs = ext2_1k.fs
        c.add("superblock", "ext2-1k-backup-superblock-group-1",
              fs.pread((fs.bpg + 1) * fs.bs, 1024))
        for path, what in [("files/large-3m", "large-file-indirect-inode"),
                           ("seeds/fragmented", "fragmented-dind-inode"),
                           ("links/slow", "slow-symlink-inode"),
                           ("files/size-100", "small-file-inode"), (11, "lost-found-inode")]:
            ext2_1k.add_inode(path, what)
        ext2_1k.add("dirblock", "wide-dir-first-block", ext2_1k.dir_block("wide", 0))
        ext2_1k.add("dirblock", "wide-dir-last-block", ext2_1k.dir_block("wide", -1))
        ext2_1k.add("dirblock", "long-names-dir-block", ext2_1k.dir_block("seeds/long-names", 3))
        ext2_1k.add("dirblock", "names-dir-block", ext2_1k.dir_block("names", 0))
        ext2_1k.add("xattr", "xattr-block-600-byte-value", ext2_1k.xattr_block("links/original"))
        ext2_1k.add("xattr", "xattr-block-12-entries", ext2_1k.xattr_block("files/size-4096"))
        ext2_1k.add("xattr", "in-inode-xattrs-acl", ext2_1k.xattr_area("deep/a"))

    for name in ("ext2", "ext3", "ext4-nocsum", "ext4-no64-noflex", "ext4-1k",
                 "ext4-bigalloc", "ext4-inline", "ext4-quota", "ext2-128", "ext4-fc"):
        im = img(name)
        if not im:
            continue
        add_common(im)
        fs = im.fs
        if name == "ext2":
            im.add_inode("files/large-3m", "large-file-indirect-inode")
            im.add("xattr", "xattr-block-600-byte-value", im.xattr_block("links/original"))
            im.add("dirblock", "special-dir-block", im.dir_block("special", 0))
        elif name == "ext3":
            im.add_inode(8, "journal-indirect-inode")
            im.add_inode("files/size-100", "small-file-inode")
            im.add("xattr", "xattr-block-12-entries", im.xattr_block("files/size-4096"))
        elif name == "ext4-nocsum":
            im.add_inode("files/size-100", "small-file-inode")
            im.add_inode("links/original", "xattr-block-file-inode")
            im.add("xattr", "xattr-block-600-byte-value", im.xattr_block("links/original"))
            im.add("extent", "fragmented-index-iblock", im.iblock("seeds/fragmented"))
            eb = im.extent_blocks("seeds/fragmented")
            if eb:
                im.add("extent", "fragmented-depth0-block-0", fs.block(eb[0][0]))
            im.add("dirblock", "files-dir-block", im.dir_block("files", 0))
        elif name == "ext4-no64-noflex":
            im.add_inode("files/large-3m", "large-file-inode")
            im.add("extent", "large-file-iblock", im.iblock("files/large-3m"))
            eb = im.extent_blocks("seeds/fragmented")
            if eb:
                im.add("extent", "fragmented-depth0-block-last", fs.block(eb[-1][0]))
            im.add("xattr", "xattr-block-600-byte-value", im.xattr_block("links/original"))
        elif name == "ext4-1k":
            c.add("superblock", "ext4-1k-backup-superblock-group-1",
                  fs.pread((fs.bpg + 1) * fs.bs, 1024))
            im.add_inode("seeds/fragmented", "fragmented-depth2-inode")
            im.add_inode("links/slow", "slow-symlink-inode")
            im.add("extent", "fragmented-depth2-iblock", im.iblock("seeds/fragmented"))
            eb = im.extent_blocks("seeds/fragmented")
            idx = [b for b, k in eb if k != "extent-0"]
            leaves = [b for b, k in eb if k == "extent-0"]
            for k, b in enumerate(idx[:2]):
                im.add("extent", "fragmented-depth1-index-block-%d" % k, fs.block(b))
            if leaves:
                im.add("extent", "fragmented-depth0-block-first", fs.block(leaves[0]))
                im.add("extent", "fragmented-depth0-block-last", fs.block(leaves[-1]))
            im.add("extent", "slow-symlink-iblock", im.iblock("links/slow"))
            im.add("dirblock", "wide-dir-block", im.dir_block("wide", 1))
            im.add("dirblock", "names-dir-block", im.dir_block("names", 0))
            im.add("xattr", "xattr-block-600-byte-value", im.xattr_block("links/original"))
            im.add("xattr", "xattr-block-12-entries", im.xattr_block("files/size-4096"))
        elif name == "ext4-bigalloc":
            im.add_inode("files/large-3m", "large-file-inode")
            im.add("extent", "fragmented-index-iblock", im.iblock("seeds/fragmented"))
            im.add("extent", "large-file-iblock", im.iblock("files/large-3m"))
            eb = im.extent_blocks("seeds/fragmented")
            if eb:
                im.add("extent", "fragmented-depth0-block-0", fs.block(eb[0][0]))
        elif name == "ext4-inline":
            for path, what in [("files/size-0", "inline-empty-inode"),
                               ("files/size-59", "inline-file-59-inode"),
                               ("files/size-100", "inline-file-xattr-data-inode"),
                               ("special", "inline-dir-inode"),
                               ("dirs/d1/sub", "inline-dir-small-inode"),
                               ("links/slow", "slow-symlink-inode")]:
                im.add_inode(path, what)
            im.add("xattr", "in-inode-system-data", im.xattr_area("files/size-100"))
            im.add("xattr", "in-inode-system-data-empty", im.xattr_area("files/size-0"))
            im.add("xattr", "in-inode-system-data-dir-trusted", im.xattr_area("dirs/d1"))
            im.add("xattr", "in-inode-system-data-dir-acl", im.xattr_area("deep/a"))
            ib = im.iblock("special")
            if ib:
                im.add("dirblock", "inline-dir-iblock-entries", ib[4:])
        elif name == "ext4-quota":
            sb = fs.sb
            for off, what in ((0x240, "user-quota-inode"), (0x244, "group-quota-inode"),
                              (0x26C, "project-quota-inode")):
                if le32(sb, off):
                    im.add_inode(le32(sb, off), what)
                    if what == "user-quota-inode":
                        im.add("extent", "user-quota-iblock", im.iblock(le32(sb, off)))
        elif name == "ext2-128":
            for path, what in [("files/size-100", "small-file-inode"),
                               ("links/fast", "fast-symlink-inode"),
                               ("special/char", "chardev-inode"),
                               ("files/large-3m", "large-file-indirect-inode")]:
                im.add_inode(path, what)
            im.add("xattr", "xattr-block-small-attribute", im.xattr_block("files/size-100"))
        elif name == "ext4-fc":
            im.add_inode(8, "journal-fast-commit-inode")

    # -- directories indexed by e2fsck -D -------------------------------------
    for name in ("ext4", "ext4-1k", "ext4-nocsum", "ext3", "ext2-128", "ext4-bigalloc",
                 "ext4-no64-noflex", "ext4-1k-tea", "ext4-1k-legacy"):
        im = img(name + ".dx", name + "-dx")
        if not im:
            continue
        if name.endswith(("tea", "legacy")):
            im.add("superblock", "superblock", im.fs.sb)
        for path, what in (("wide", "wide"), ("seeds/long-names", "long-names")):
            root, nodes = dx_blocks(im, path)
            im.add("htree", "%s-dx-root" % what, root)
            for k, n in enumerate(nodes[:2]):
                im.add("htree", "%s-dx-node-%d" % (what, k), n)
            if name in ("ext4", "ext4-1k", "ext4-nocsum", "ext2-128") and root is not None:
                im.add("dirblock", "%s-htree-leaf-block" % what, im.dir_block(path, 2))
        if name in ("ext4", "ext4-nocsum"):
            im.add_inode("wide", "htree-dir-inode")

    # -- journals ---------------------------------------------------------------
    for name in ("ext3", "ext4"):
        im = img(name)
        if im:
            try:
                j = Journal(im.fs)
                c.add("journal", "%s-journal-superblock-unused" % name, j.read(0))
            except (ValueError, KeyError) as e:
                warn("%s: %s" % (name, e))
    for name, base in (("ext3", "ext3"), ("ext3-csum-v1", "ext3"),
                       ("ext4-nocsum-async", "ext4-nocsum"), ("ext4", "ext4"),
                       ("ext4-no64-noflex", "ext4-no64-noflex"), ("ext4-1k", "ext4-1k"),
                       ("ext4-fc", "ext4-fc")):
        im = img("journal-" + name, name)
        if not im:
            continue
        fs = im.fs
        c.add("superblock", "%s-superblock-needs-recovery" % name, canon_superblock(
            fs.sb, fs.metadata_csum))
        try:
            j = Journal(fs)
        except (ValueError, KeyError) as e:
            warn("%s: %s" % (name, e))
            continue
        jsb = j.read(0)
        c.add("journal", "%s-journal-superblock" % name, jsb)
        if name == "ext3":
            v1 = bytearray(jsb[:1024])
            struct.pack_into(">I", v1, 4, JB_SB1)
            v1[0x20:0x100] = bytes(0x100 - 0x20)
            c.add("journal", "ext3-journal-superblock-v1-from-v2", bytes(v1) + jsb[1024:])
        txs = j.transactions()
        if not txs:
            warn("%s: no committed transaction in the journal" % name)
            continue
        descs = [d for tx in txs for d, _ in tx["desc"]]
        revokes = [r for tx in txs for r in tx["revoke"]]
        for k, dj in enumerate(descs[:2]):
            c.add("journal", "%s-journal-descriptor-%d" % (name, k + 1), j.read(dj))
        if len(descs) > 2:
            c.add("journal", "%s-journal-descriptor-last" % name, j.read(descs[-1]))
        for k, rj in enumerate(revokes[:2]):
            c.add("journal", "%s-journal-revoke-%d" % (name, k + 1), j.read(rj))
        c.add("journal", "%s-journal-commit-1" % name, j.read(txs[0]["commit"]))
        if name in ("ext4", "ext3"):
            # Metadata blocks as the journal carries them, after the changes.
            done = set()
            ipb = fs.bs // fs.inode_size
            for tx in txs:
                for _, tags in tx["desc"]:
                    for _, blk, flags, dataj in tags:
                        data = bytearray(j.read(dataj))
                        if flags & TAG_ESCAPE:
                            struct.pack_into(">I", data, 0, JBD2_MAGIC)
                        loc = fs.itable_lookup(blk)
                        if loc:
                            g, first = loc
                            for k in range(ipb):
                                raw = data[k * fs.inode_size:(k + 1) * fs.inode_size]
                                mode, links = le16(raw, 0), le16(raw, 0x1A)
                                kind = None
                                if mode and links == 0 and le32(raw, 0x14):
                                    kind = "deleted-inode"
                                elif mode & S_IFMT == S_IFREG and le32(raw, 0x20) & EXTENTS_FL \
                                        and le32(raw, 0x28 + 12 + 4) & 0xFFFF > 32768:
                                    kind = "fallocated-inode"
                                if kind and kind not in done:
                                    done.add(kind)
                                    c.add("inode", "%s-journal-%s" % (name, kind), raw)
                                    if kind == "fallocated-inode":
                                        c.add("extent", "%s-journal-uninit-extent-iblock" % name,
                                              raw[0x28:0x28 + 60])
            # The blocks the wide directory had before the changes.
            before = img(base)
            wide_blocks = set()
            if before and before.ino("wide"):
                wide_blocks = set(before.fs.file_blocks(before.inode("wide")))
            for tx in txs:
                for _, tags in tx["desc"]:
                    for _, blk, flags, dataj in tags:
                        if blk in wide_blocks and "dir" not in done:
                            done.add("dir")
                            c.add("dirblock", "%s-journal-wide-dir-block-after-create" % name,
                                  j.read(dataj))
    c.write(out)
    total = 0
    for target in sorted(c.seeds):
        n = len(c.seeds[target])
        size = sum(len(d) for _, d, _ in c.seeds[target])
        total += size
        print("%-11s %3d seeds %8d bytes" % (target, n, size))
    print("%-11s %3d seeds %8d bytes" % ("total", sum(len(v) for v in c.seeds.values()), total))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "tree-extras":
        tree_extras(args[0])
    elif cmd == "tree-times":
        tree_times(args[0])
    elif cmd == "journal-ops":
        journal_ops(args[0], "--fsync" in args[1:])
    elif cmd == "journal-canon":
        journal_canon(args[0])
    elif cmd == "journal-summary":
        journal_summary(args[0])
    elif cmd == "extract":
        extract(args[0], args[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
