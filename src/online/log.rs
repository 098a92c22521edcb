//! What changed on a mounted file system between two moments, from its
//! journal: every metadata block the kernel changes goes through a jbd2
//! transaction, whose descriptor blocks name the blocks it logs. A copy
//! of the metadata taken while the file system runs is made consistent
//! by taking again, under a freeze, only the blocks the transactions
//! committed since the copy began name.
//!
//! ext4's freeze flushes the journal: every transaction is committed and
//! checkpointed, and the journal superblock then says the log is empty
//! and gives the next transaction's id. The log blocks themselves stay
//! until the log wraps over them, so the transactions from the moment
//! the copy began to the freeze can be read back, from the log position
//! the journal superblock gave at that moment.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use check_core::io::Io;
use ext4_layout::features::CompatFeatures;
use ext4_layout::journal::descriptor::DescriptorBlock;
use ext4_layout::journal::superblock::{self as jsbl, JournalFeatures, JournalSuperblock};
use ext4_layout::journal::{blocktype, BlockHeader, JBD2_MAGIC};

/// Where the journal's log lies on the device.
pub struct Journal {
    /// The file system block of each log block.
    blocks: Vec<u64>,
    block_size: u64,
    features: JournalFeatures,
    /// The first log block after the journal superblock.
    first: u64,
    /// Where the log wraps.
    maxlen: u64,
}

/// A moment in the log: where it started and the id of its first
/// transaction, as the journal superblock said.
#[derive(Clone, Debug)]
pub struct Mark {
    /// Where the log may begin: the superblock's start, or, when the log
    /// was empty, where the next transaction can begin (the log's first
    /// block after a mount, or the block after the last commit).
    starts: Vec<u64>,
    sequence: u32,
}

impl Journal {
    /// The journal of the file system on `dev`, read through the page
    /// cache. `None` when changes cannot be read from it: no journal, an
    /// external one, or fast commits (whose records name files, not
    /// blocks).
    pub fn open(dev: &Arc<pipeline::Device>, file: &std::fs::File) -> Option<Journal> {
        let opened =
            check_core::fs::open_fs(dev.clone(), check_core::fs::OpenOptions::default()).ok()?;
        let fs = opened.fs;
        let sb = fs.sb();
        if !fs.geo.compat.contains(CompatFeatures::HAS_JOURNAL)
            || sb.s_journal_inum() == 0
            || sb.s_journal_dev() != 0
        {
            return None;
        }
        let mut io = Io::new(&fs);
        let map = check_core::journal::journal_map(&fs, &mut io)?;
        drop(io);
        // A hole in the map would shift every later log block.
        if !map.complete || map.holes {
            return None;
        }
        let blocks = map.blocks;
        let block_size = u64::from(fs.geo.block_size);
        let mut j = Journal {
            blocks,
            block_size,
            features: JournalFeatures::default(),
            first: 0,
            maxlen: 0,
        };
        let jsb = j.read_log_block_raw(file, 0)?;
        let s = JournalSuperblock::new(&jsb)?;
        j.features = s.features();
        if j.features.incompat & JournalFeatures::INCOMPAT_FAST_COMMIT != 0 {
            return None;
        }
        j.first = u64::from(jsbl::field::s_first.get(&jsb));
        j.maxlen = u64::from(jsbl::field::s_maxlen.get(&jsb)).min(j.blocks.len() as u64);
        (j.first > 0 && j.first < j.maxlen).then_some(j)
    }

    fn read_log_block_raw(&self, dev: &std::fs::File, lb: u64) -> Option<Vec<u8>> {
        let fsb = *self.blocks.get(lb as usize)?;
        let mut b = vec![0u8; self.block_size as usize];
        dev.read_exact_at(&mut b, fsb * self.block_size).ok()?;
        Some(b)
    }

    /// The log's position now, from the journal superblock.
    pub fn mark(&self, dev: &std::fs::File) -> Option<Mark> {
        let (start, sequence) = self.superblock(dev)?;
        if start != 0 {
            return Some(Mark {
                starts: vec![start],
                sequence,
            });
        }
        // An empty log: the next transaction begins where the last one
        // ended, or at the first block if none was written since mount.
        let mut starts = vec![self.first];
        let last = sequence.wrapping_sub(1);
        for lb in self.first..self.maxlen {
            let Some(b) = self.read_log_block_raw(dev, lb) else {
                break;
            };
            if let Some(h) = BlockHeader::parse(&b) {
                if h.h_magic == JBD2_MAGIC
                    && h.h_blocktype == blocktype::COMMIT
                    && h.h_sequence == last
                {
                    starts.push(self.wrap(lb + 1));
                }
            }
        }
        Some(Mark { starts, sequence })
    }

    /// The journal superblock's (start, sequence).
    fn superblock(&self, dev: &std::fs::File) -> Option<(u64, u32)> {
        let jsb = self.read_log_block_raw(dev, 0)?;
        let h = BlockHeader::parse(&jsb)?;
        if h.h_magic != JBD2_MAGIC {
            return None;
        }
        Some((
            u64::from(jsbl::field::s_start.get(&jsb)),
            jsbl::field::s_sequence.get(&jsb),
        ))
    }

    /// The byte offset on the device of file system block `b`.
    pub fn offset(&self, b: u64) -> u64 {
        b * self.block_size
    }

    /// The file system blocks the transactions committed since `since`
    /// logged, read while the file system is frozen (the journal then
    /// empty). `None` when that cannot be told: no start the mark gave
    /// leads through the transactions to the present (the log wrapped
    /// over them, or they began elsewhere).
    pub fn changed_since(&self, dev: &std::fs::File, since: &Mark) -> Option<Vec<u64>> {
        let (now_start, end) = self.superblock(dev)?;
        if now_start != 0 {
            // Not flushed: this is not a frozen ext4.
            return None;
        }
        if end == since.sequence {
            return Some(Vec::new());
        }
        since
            .starts
            .iter()
            .find_map(|&start| self.walk(dev, start, since.sequence, end))
    }

    /// The blocks transactions `from` up to `end` logged, walking from
    /// log block `start`; `None` where the log is not those transactions.
    fn walk(&self, dev: &std::fs::File, start: u64, from: u32, end: u32) -> Option<Vec<u64>> {
        let mut out = Vec::new();
        let mut id = from;
        let mut lb = start;
        // A log can hold no more descriptor, data and commit blocks than
        // it has; more steps mean the walk is going round.
        let mut steps = 0u64;
        while id != end {
            steps += 1;
            if steps > self.maxlen {
                return None;
            }
            let buf = self.read_log_block_raw(dev, lb)?;
            lb = self.wrap(lb + 1);
            let h = BlockHeader::parse(&buf)?;
            if h.h_magic != JBD2_MAGIC || h.h_sequence != id {
                return None;
            }
            match h.h_blocktype {
                blocktype::DESCRIPTOR => {
                    for tag in DescriptorBlock::new(&buf, self.features).tags() {
                        out.push(tag.blocknr);
                        lb = self.wrap(lb + 1);
                    }
                }
                blocktype::COMMIT => id = id.wrapping_add(1),
                blocktype::REVOKE => {}
                _ => return None,
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    fn wrap(&self, b: u64) -> u64 {
        if b >= self.maxlen {
            b - (self.maxlen - self.first)
        } else {
            b
        }
    }
}
