//! An in-memory backend: a share held in a map of nodes, for tests that
//! drive the protocol core deterministically and at memory speed.
//!
//! It answers as [`PosixVfs`](crate::posix::PosixVfs) does on a local
//! Linux filesystem for everything the [`Vfs`] trait documents, errors
//! included (`tests/contract.rs` holds both backends to that). What only a
//! disk has is left out: there are no symlinks, special files, hard links
//! or permissions, and nothing survives the value.
//!
//! Times come from a counter, not the clock, so that a run repeats
//! exactly: every operation that changes something moves it on by one
//! microsecond and stamps what it changed with the new value, as Linux
//! stamps mtime and ctime. Reads leave the access time alone (as with
//! `noatime`).
//!
//! Handles hold their node, not its name: a node unlinked while open stays
//! readable and writable through its handles and goes when the last of
//! them is dropped, as an unlinked inode does.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rustix::io::Errno;

use crate::names::{fold, join, split};
use crate::shortname;
use crate::{
    attr, CreateAction, Disposition, Ea, FileHandle, FileStat, FsStat, Identity, Kind, OpenRequest,
    Opened, Quota, QuotaState, SetTimes, UnixAccess, Vfs, VfsError, VfsResult,
};

/// 2024-01-01T00:00:00Z, where every instance's clock starts.
pub const START_TIME: u64 = 133_485_408_000_000_000;
/// What the clock moves on by per change: 1 µs in FILETIME units.
const TICK: u64 = 10;
/// Allocation unit, as on ext4: sizes on disk are whole blocks, and file
/// data is kept in blocks so that sparse files stay small.
const BLOCK: u64 = 4096;
/// Linux's NAME_MAX and PATH_MAX, which PosixVfs meets as InvalidName.
const NAME_MAX: usize = 255;
const PATH_MAX: usize = 4096;
/// Streams and security descriptors live in xattrs under PosixVfs, whose
/// values Linux caps at 64 KiB.
const MAX_XATTR: usize = 65536;
/// The longest stream name PosixVfs can hold: xattr names are capped at
/// 255 bytes, and its prefix `user.copyless.stream.` takes 21 of them.
const MAX_STREAM_NAME: usize = 255 - 21;
/// The largest file offset Linux handles (an off_t).
const MAX_OFFSET: u64 = i64::MAX as u64;
const TOTAL_BLOCKS: u64 = 1 << 24;
const ROOT: u64 = 1;
/// The device every instance reports: the same on every run, so that
/// replies carrying file ids repeat too. The core tells shares apart by
/// their index, not by device.
const DEV: u64 = 0x6d656d;

/// Tells instances apart, so that one refuses another's handles.
static INSTANCES: AtomicU64 = AtomicU64::new(1);

pub struct MemoryVfs {
    id: u64,
    state: Mutex<State>,
}

/// What a handle of a [`MemoryVfs`] holds on to.
#[derive(Debug)]
pub(crate) struct NodeRef {
    pin: Arc<Pin>,
    /// Opened for writing: Linux refuses writes, truncation and
    /// preallocation through a descriptor opened read-only, and a test
    /// should see a core that tries the same way.
    writable: bool,
}

/// Shared by every handle of one node; the node may go once none is left.
#[derive(Debug)]
struct Pin {
    vfs: u64,
    node: u64,
}

struct State {
    nodes: HashMap<u64, Node>,
    next_id: u64,
    /// Nodes no longer in any directory that a handle may still hold.
    orphans: Vec<u64>,
    clock: u64,
    /// A security descriptor was stored at some point: until then there
    /// are none to look up, as PosixVfs's marker on the share root says.
    acls_in_use: bool,
    /// An EA was stored at some point (PosixVfs's marker likewise).
    eas_in_use: bool,
    /// Users' quota limits (soft, hard) by uid, where the share keeps
    /// quotas ([`MemoryVfs::with_quotas`]).
    quotas: Option<BTreeMap<u32, (u64, u64)>>,
}

struct Node {
    body: Body,
    /// The directory it is in; None for the root and once unlinked.
    parent: Option<u64>,
    linked: bool,
    /// The stored DOS attribute bits (attr::SETTABLE).
    attrs: u32,
    creation_time: u64,
    last_access_time: u64,
    last_write_time: u64,
    change_time: u64,
    /// A client set the change time: setting attributes or other times
    /// leaves it, until the data changes (as PosixVfs keeps it).
    change_time_set: bool,
    streams: BTreeMap<String, Vec<u8>>,
    security: Option<Vec<u8>>,
    eas: Vec<Ea>,
    pin: Weak<Pin>,
    /// Who owns it (its creator; the server's own work makes root's), and
    /// its permission bits, which [`Vfs::unix_access`] answers by.
    uid: u32,
    gid: u32,
    perm: u32,
}

enum Body {
    File(FileData),
    Dir(BTreeMap<String, u64>),
}

#[derive(Default)]
struct FileData {
    size: u64,
    /// Blocks written, by index; the rest reads as zeros.
    blocks: BTreeMap<u64, Box<[u8]>>,
    /// Bytes from offset 0 preallocated (a multiple of BLOCK).
    prealloc: u64,
}

impl FileData {
    fn read(&self, offset: u64, buf: &mut [u8]) -> usize {
        let end = self.size.min(offset.saturating_add(buf.len() as u64));
        if offset >= end {
            return 0;
        }
        let n = (end - offset) as usize;
        let buf = &mut buf[..n];
        buf.fill(0);
        let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
        for (&index, block) in self.blocks.range(first..=last) {
            let start = (index * BLOCK).max(offset);
            let stop = ((index + 1) * BLOCK).min(end);
            let from = (start - index * BLOCK) as usize;
            let to = (start - offset) as usize;
            let len = (stop - start) as usize;
            buf[to..to + len].copy_from_slice(&block[from..from + len]);
        }
        n
    }

    /// Writes `data` at `offset`; the caller has checked that the end
    /// stays below MAX_OFFSET.
    fn write(&mut self, offset: u64, data: &[u8]) {
        let mut at = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let index = at / BLOCK;
            let from = (at % BLOCK) as usize;
            let len = rest.len().min(BLOCK as usize - from);
            let block = self
                .blocks
                .entry(index)
                .or_insert_with(|| vec![0; BLOCK as usize].into_boxed_slice());
            block[from..from + len].copy_from_slice(&rest[..len]);
            at += len as u64;
            rest = &rest[len..];
        }
        self.size = self.size.max(at);
    }

    fn truncate(&mut self, len: u64) {
        let kept = len.div_ceil(BLOCK);
        self.blocks.split_off(&kept);
        // The part of the last block past the end must read as zeros when
        // the file grows again (none is kept when the end is on a block
        // boundary).
        if let Some(block) = self.blocks.get_mut(&(len / BLOCK)) {
            block[(len % BLOCK) as usize..].fill(0);
        }
        // Linux frees the blocks past a new end of file, preallocated ones
        // included.
        self.prealloc = self.prealloc.min(kept * BLOCK);
        self.size = len;
    }

    fn preallocate(&mut self, len: u64) {
        self.prealloc = self.prealloc.max(len.div_ceil(BLOCK) * BLOCK);
    }

    /// Zeroes `offset..end` below the end of file; with `deallocate`
    /// the blocks wholly inside are freed, else they stay (holes stay
    /// holes).
    fn zero(&mut self, offset: u64, end: u64, deallocate: bool) {
        let end = end.min(self.size);
        if offset >= end {
            return;
        }
        let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
        let whole = offset.div_ceil(BLOCK)..end / BLOCK;
        let mut freed = Vec::new();
        for (&index, block) in self.blocks.range_mut(first..=last) {
            if deallocate && whole.contains(&index) {
                freed.push(index);
                continue;
            }
            let from = (index * BLOCK).max(offset) - index * BLOCK;
            let to = ((index + 1) * BLOCK).min(end) - index * BLOCK;
            block[from as usize..to as usize].fill(0);
        }
        for index in freed {
            self.blocks.remove(&index);
        }
    }

    /// The allocated ranges (preallocated or written) within
    /// `offset..end`, joined, at most `limit`.
    fn allocated(&self, offset: u64, end: u64, limit: usize) -> Vec<std::ops::Range<u64>> {
        let mut ranges: Vec<std::ops::Range<u64>> = Vec::new();
        let pre = (self.prealloc > 0).then_some(0..self.prealloc);
        let written = self.blocks.keys().map(|&i| i * BLOCK..(i + 1) * BLOCK);
        for r in pre.into_iter().chain(written) {
            let r = r.start.max(offset)..r.end.min(end);
            if r.is_empty() {
                continue;
            }
            let full = ranges.len() == limit;
            match ranges.last_mut() {
                Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
                _ if full => break,
                _ => ranges.push(r),
            }
        }
        ranges
    }

    fn alloc_size(&self) -> u64 {
        let prealloc_blocks = self.prealloc / BLOCK;
        let written = self.blocks.range(prealloc_blocks..).count() as u64;
        (prealloc_blocks + written) * BLOCK
    }
}

impl Node {
    fn new(body: Body, parent: u64, attrs: u32, now: u64) -> Node {
        // What 0o777 and 0o666 become under the usual umask 022.
        let perm = if matches!(body, Body::Dir(_)) {
            0o755
        } else {
            0o644
        };
        Node {
            uid: 0,
            gid: 0,
            perm,
            body,
            parent: Some(parent),
            linked: true,
            attrs,
            creation_time: now,
            last_access_time: now,
            last_write_time: now,
            change_time: now,
            change_time_set: false,
            streams: BTreeMap::new(),
            security: None,
            eas: Vec::new(),
            pin: Weak::new(),
        }
    }

    fn is_dir(&self) -> bool {
        matches!(self.body, Body::Dir(_))
    }

    fn children(&self) -> Option<&BTreeMap<String, u64>> {
        match &self.body {
            Body::Dir(children) => Some(children),
            Body::File(_) => None,
        }
    }

    fn children_mut(&mut self) -> Option<&mut BTreeMap<String, u64>> {
        match &mut self.body {
            Body::Dir(children) => Some(children),
            Body::File(_) => None,
        }
    }

    fn modified(&mut self, now: u64) {
        self.last_write_time = now;
        self.change_time = now;
        self.change_time_set = false;
    }

    /// Its metadata changed by a client at `now`: a change time the
    /// client set stays.
    fn metadata_changed(&mut self, now: u64) {
        if !self.change_time_set {
            self.change_time = now;
        }
    }
}

impl Default for MemoryVfs {
    fn default() -> MemoryVfs {
        MemoryVfs::new()
    }
}

impl State {
    /// The bytes the files of `uid` take.
    fn used_by(&self, uid: u32) -> u64 {
        self.nodes
            .values()
            .filter(|n| n.uid == uid)
            .map(|n| match &n.body {
                Body::File(data) => data.alloc_size(),
                Body::Dir(_) => 0,
            })
            .sum()
    }
}

impl MemoryVfs {
    /// An empty share.
    pub fn new() -> MemoryVfs {
        let mut root = Node::new(Body::Dir(BTreeMap::new()), ROOT, 0, START_TIME);
        root.parent = None;
        MemoryVfs {
            id: INSTANCES.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(State {
                nodes: HashMap::from([(ROOT, root)]),
                next_id: ROOT + 1,
                orphans: Vec::new(),
                clock: START_TIME,
                acls_in_use: false,
                eas_in_use: false,
                quotas: None,
            }),
        }
    }

    /// A share whose users' use is counted and whose limits are said to
    /// be enforced, as XFS mounted with `uquota` says; for the protocol
    /// above it, since nothing here refuses a write past a limit.
    pub fn with_quotas(self) -> MemoryVfs {
        self.lock().quotas = Some(BTreeMap::new());
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node a handle holds, if it is one of ours.
    fn node_of<'h>(&self, h: &'h FileHandle) -> VfsResult<&'h NodeRef> {
        h.memory()
            .filter(|r| r.pin.vfs == self.id)
            .ok_or_else(bad_handle)
    }

    fn handle(
        &self,
        st: &mut State,
        id: u64,
        writable: bool,
        stream: Option<Box<str>>,
    ) -> VfsResult<FileHandle> {
        let node = st.nodes.get_mut(&id).ok_or_else(bad_handle)?;
        let is_dir = node.is_dir() && stream.is_none();
        let pin = match node.pin.upgrade() {
            Some(pin) => pin,
            None => {
                let pin = Arc::new(Pin {
                    vfs: self.id,
                    node: id,
                });
                node.pin = Arc::downgrade(&pin);
                pin
            }
        };
        Ok(FileHandle::from_memory(
            NodeRef { pin, writable },
            is_dir,
            stream,
        ))
    }

    /// Gives the object at `path` (a real path) an owner and permission
    /// bits, as chown and chmod would.
    pub fn set_owner(&self, path: &str, uid: u32, gid: u32, perm: u32) -> VfsResult<()> {
        let comps = split(path)?;
        let mut st = self.lock();
        let id = match comps.split_last() {
            None => ROOT,
            Some((last, parents)) => {
                let (dir, _) = st.resolve_dir(parents)?;
                st.find_child(dir, last)?.ok_or(VfsError::NameNotFound)?.1
            }
        };
        let node = st.node_mut(id)?;
        (node.uid, node.gid, node.perm) = (uid, gid, perm & 0o7777);
        Ok(())
    }

    fn open_root(&self, st: &mut State, req: &OpenRequest<'_>) -> VfsResult<Opened> {
        crate::root_may_open(req)?;
        Ok(Opened {
            handle: self.handle(st, ROOT, false, None)?.acting_as(req.who),
            action: CreateAction::Opened,
            stat: st.stat(ROOT)?,
            path: String::new(),
            may_unlink: None,
        })
    }
}

impl State {
    fn tick(&mut self) -> u64 {
        self.clock += TICK;
        self.clock
    }

    fn node(&self, id: u64) -> VfsResult<&Node> {
        self.nodes.get(&id).ok_or_else(bad_handle)
    }

    fn node_mut(&mut self, id: u64) -> VfsResult<&mut Node> {
        self.nodes.get_mut(&id).ok_or_else(bad_handle)
    }

    fn file_mut(&mut self, id: u64) -> VfsResult<&mut FileData> {
        match &mut self.node_mut(id)?.body {
            Body::File(data) => Ok(data),
            Body::Dir(_) => Err(bad_handle()),
        }
    }

    /// Finds `name` in directory `dir`: the exact name first, else one
    /// equal to it case-insensitively. Its real name and id.
    fn find_child(&self, dir: u64, name: &str) -> VfsResult<Option<(String, u64)>> {
        if name.len() > NAME_MAX {
            return Err(VfsError::InvalidName);
        }
        let children = self.node(dir)?.children().ok_or(VfsError::PathNotFound)?;
        if let Some(&id) = children.get(name) {
            return Ok(Some((name.to_owned(), id)));
        }
        let folded = fold(name);
        let found = children.iter().find(|(n, _)| fold(n) == folded);
        // As PosixVfs: a short name names its long-named entry.
        let found = found.or_else(|| {
            shortname::is_hashed(name)
                .then(|| children.iter().find(|(n, _)| shortname::matches(name, n)))
                .flatten()
        });
        Ok(found.map(|(n, &id)| (n.clone(), id)))
    }

    /// Resolves the directories of a path case-insensitively: the last
    /// one and its real path.
    fn resolve_dir(&self, comps: &[&str]) -> VfsResult<(u64, String)> {
        // PosixVfs opens the whole path at once first, which fails on one
        // longer than PATH_MAX (its NUL included).
        if comps.iter().map(|c| c.len() + 1).sum::<usize>() > PATH_MAX {
            return Err(VfsError::InvalidName);
        }
        let mut dir = ROOT;
        let mut real = String::new();
        for comp in comps {
            let (name, id) = self.find_child(dir, comp)?.ok_or(VfsError::PathNotFound)?;
            if !self.node(id)?.is_dir() {
                return Err(VfsError::PathNotFound);
            }
            real = join(&real, &name);
            dir = id;
        }
        Ok((dir, real))
    }

    fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn stat(&self, id: u64) -> VfsResult<FileStat> {
        let node = self.node(id)?;
        let (is_dir, size, alloc_size, nlink) = match &node.body {
            Body::File(data) => (false, data.size, data.alloc_size(), 1),
            Body::Dir(children) => {
                let subdirs = children
                    .values()
                    .filter(|c| self.nodes.get(c).is_some_and(Node::is_dir))
                    .count();
                (true, BLOCK, BLOCK, 2 + subdirs as u32)
            }
        };
        let mut attributes = node.attrs & attr::STORED;
        if is_dir {
            attributes |= attr::DIRECTORY;
        }
        if attributes == 0 {
            attributes = attr::NORMAL;
        }
        Ok(FileStat {
            dev: DEV,
            ino: id,
            size,
            alloc_size,
            nlink: if node.linked { nlink } else { 0 },
            is_dir,
            creation_time: node.creation_time,
            last_access_time: node.last_access_time,
            last_write_time: node.last_write_time,
            change_time: node.change_time,
            attributes,
            mode: node.perm | if is_dir { 0o040_000 } else { 0o100_000 },
            uid: node.uid,
            gid: node.gid,
            ea_size: crate::eas::encode(&node.eas).len() as u32,
        })
    }

    /// Takes `id` out of the tree: it goes now, or when its last handle
    /// has been dropped.
    fn detach(&mut self, id: u64, now: u64) {
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        node.parent = None;
        node.linked = false;
        node.change_time = now;
        if node.pin.strong_count() == 0 {
            self.nodes.remove(&id);
        } else {
            self.orphans.push(id);
        }
    }

    /// Drops the unlinked nodes whose handles are all gone.
    fn sweep(&mut self) {
        let nodes = &mut self.nodes;
        self.orphans.retain(|id| {
            let held = nodes.get(id).is_some_and(|n| n.pin.strong_count() > 0);
            if !held {
                nodes.remove(id);
            }
            held
        });
    }

    /// Whether `dir` is `ancestor` or lies beneath it.
    fn is_within(&self, mut dir: u64, ancestor: u64) -> bool {
        loop {
            if dir == ancestor {
                return true;
            }
            match self.nodes.get(&dir).and_then(|n| n.parent) {
                Some(parent) => dir = parent,
                None => return false,
            }
        }
    }

    /// Moves entry `name` of `from` to `to` as `new_name`.
    fn move_entry(&mut self, from: u64, name: &str, to: u64, new_name: &str, now: u64) {
        let Some(id) = self
            .nodes
            .get_mut(&from)
            .and_then(Node::children_mut)
            .and_then(|c| c.remove(name))
        else {
            return;
        };
        if let Some(children) = self.nodes.get_mut(&to).and_then(Node::children_mut) {
            children.insert(new_name.to_owned(), id);
        }
        for dir in [from, to] {
            if let Some(d) = self.nodes.get_mut(&dir) {
                d.modified(now);
            }
        }
        if let Some(node) = self.nodes.get_mut(&id) {
            node.parent = Some(to);
            node.change_time = now;
        }
    }

    /// The data of the stream `name` of node `id`; NameNotFound once the
    /// stream was deleted.
    fn stream_mut(&mut self, id: u64, name: &str) -> VfsResult<&mut Vec<u8>> {
        self.node_mut(id)?
            .streams
            .get_mut(name)
            .ok_or(VfsError::NameNotFound)
    }

    /// The stored name of stream `name` of `id`, matched
    /// case-insensitively.
    fn find_stream(&self, id: u64, name: &str) -> VfsResult<Option<String>> {
        if name.len() > MAX_STREAM_NAME {
            return Ok(None);
        }
        let streams = &self.node(id)?.streams;
        if streams.contains_key(name) {
            return Ok(Some(name.to_owned()));
        }
        let folded = fold(name);
        Ok(streams.keys().find(|n| fold(n) == folded).cloned())
    }
}

/// What Linux says of a descriptor that is not open, and PosixVfs of one
/// that is not a descriptor: the answer to a handle of another backend or
/// another instance.
fn bad_handle() -> VfsError {
    VfsError::Io(Errno::BADF.into())
}

/// As PosixVfs's check: Windows cannot overwrite or supersede a
/// directory.
fn check_kind(is_dir: bool, kind: Kind, truncate: bool) -> VfsResult<()> {
    match is_dir {
        true if kind == Kind::NonDirectory || truncate => Err(VfsError::IsADirectory),
        false if kind == Kind::Directory => Err(VfsError::NotADirectory),
        _ => Ok(()),
    }
}

/// A time a client asked to set: 0, -1 and -2 leave it, as in PosixVfs.
fn time_to_set(t: Option<u64>) -> Option<u64> {
    t.filter(|&v| v != 0 && v < u64::MAX - 1)
}

impl Vfs for MemoryVfs {
    fn open(&self, req: &OpenRequest<'_>) -> VfsResult<Opened> {
        let comps = split(req.path)?;
        let mut st = self.lock();
        st.sweep();
        let Some((last, parents)) = comps.split_last() else {
            return self.open_root(&mut st, req);
        };
        let (dir, dir_real) = st.resolve_dir(parents)?;
        let settable = req.attributes & attr::SETTABLE;
        if let Some((name, id)) = st.find_child(dir, last)? {
            let action = match req.disposition {
                Disposition::Create => return Err(VfsError::Collision),
                Disposition::Open | Disposition::OpenIf => CreateAction::Opened,
                Disposition::Overwrite | Disposition::OverwriteIf => CreateAction::Overwritten,
                Disposition::Supersede => CreateAction::Superseded,
            };
            let truncate = action != CreateAction::Opened;
            let is_dir = st.node(id)?.is_dir();
            check_kind(is_dir, req.kind, truncate)?;
            let path = join(&dir_real, &name);
            if path.len() >= PATH_MAX {
                return Err(VfsError::InvalidName);
            }
            if truncate {
                let now = st.tick();
                let node = st.node_mut(id)?;
                node.attrs = settable | attr::ARCHIVE;
                node.modified(now);
                let data = st.file_mut(id)?;
                data.truncate(0);
                data.preallocate(req.allocation_size);
            }
            let writable = !is_dir && (req.write || truncate);
            return Ok(Opened {
                handle: self.handle(&mut st, id, writable, None)?.acting_as(req.who),
                action,
                stat: st.stat(id)?,
                path,
                may_unlink: None,
            });
        }
        if matches!(req.disposition, Disposition::Open | Disposition::Overwrite) {
            return Err(VfsError::NameNotFound);
        }
        let now = st.tick();
        let is_dir = req.kind == Kind::Directory;
        let (body, attrs) = if is_dir {
            (Body::Dir(BTreeMap::new()), settable)
        } else {
            let mut data = FileData::default();
            data.preallocate(req.allocation_size);
            (Body::File(data), settable | attr::ARCHIVE)
        };
        let id = st.new_id();
        let mut node = Node::new(body, dir, attrs, now);
        if let Identity::Unix(ids) = req.who {
            (node.uid, node.gid) = (ids.uid, ids.gid);
        }
        st.nodes.insert(id, node);
        let parent = st.node_mut(dir)?;
        parent.modified(now);
        if let Some(children) = parent.children_mut() {
            children.insert((*last).to_owned(), id);
        }
        Ok(Opened {
            handle: self
                .handle(&mut st, id, !is_dir && req.write, None)?
                .acting_as(req.who),
            action: CreateAction::Created,
            stat: st.stat(id)?,
            path: join(&dir_real, last),
            may_unlink: None,
        })
    }

    fn resolve(&self, _who: &Identity, path: &str) -> VfsResult<String> {
        let comps = split(path)?;
        let Some((last, parents)) = comps.split_last() else {
            return Ok(String::new());
        };
        let st = self.lock();
        let (dir, dir_real) = st.resolve_dir(parents)?;
        let (name, _) = st.find_child(dir, last)?.ok_or(VfsError::NameNotFound)?;
        Ok(join(&dir_real, &name))
    }

    fn stat(&self, h: &FileHandle) -> VfsResult<FileStat> {
        let node = self.node_of(h)?;
        let mut st = self.lock();
        let mut stat = st.stat(node.pin.node)?;
        if let Some(name) = &h.stream {
            let len = st.stream_mut(node.pin.node, name)?.len() as u64;
            stat.size = len;
            stat.alloc_size = len.div_ceil(BLOCK) * BLOCK;
            stat.is_dir = false;
            stat.attributes &= !attr::DIRECTORY;
            if stat.attributes == 0 {
                stat.attributes = attr::NORMAL;
            }
        }
        Ok(stat)
    }

    fn read(&self, h: &FileHandle, offset: u64, buf: &mut [u8]) -> VfsResult<usize> {
        let node = self.node_of(h)?;
        let mut st = self.lock();
        if let Some(name) = &h.stream {
            let data = st.stream_mut(node.pin.node, name)?;
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(data.len());
            let n = buf.len().min(data.len() - start);
            buf[..n].copy_from_slice(&data[start..start + n]);
            return Ok(n);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        match &st.node(node.pin.node)?.body {
            Body::Dir(_) => Err(VfsError::IsADirectory),
            Body::File(_) if offset > MAX_OFFSET => Err(VfsError::Io(Errno::INVAL.into())),
            Body::File(data) => Ok(data.read(offset, buf)),
        }
    }

    fn write(&self, h: &FileHandle, offset: u64, data: &[u8]) -> VfsResult<()> {
        let node = self.node_of(h)?;
        let id = node.pin.node;
        let mut st = self.lock();
        if let Some(name) = &h.stream {
            let end = offset
                .checked_add(data.len() as u64)
                .filter(|&e| e <= MAX_XATTR as u64)
                .ok_or(VfsError::DiskFull)? as usize;
            let now = st.tick();
            let value = st.stream_mut(id, name)?;
            if value.len() < end {
                value.resize(end, 0);
            }
            value[offset as usize..end].copy_from_slice(data);
            st.node_mut(id)?.change_time = now;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        if offset > MAX_OFFSET {
            return Err(VfsError::Io(Errno::INVAL.into()));
        }
        if !node.writable {
            return Err(bad_handle());
        }
        if offset.saturating_add(data.len() as u64) > MAX_OFFSET {
            return Err(VfsError::Io(Errno::FBIG.into()));
        }
        let now = st.tick();
        st.file_mut(id)?.write(offset, data);
        st.node_mut(id)?.modified(now);
        Ok(())
    }

    fn flush(&self, h: &FileHandle) -> VfsResult<()> {
        self.node_of(h).map(|_| ())
    }

    fn set_len(&self, h: &FileHandle, len: u64) -> VfsResult<()> {
        let node = self.node_of(h)?;
        let id = node.pin.node;
        let mut st = self.lock();
        if let Some(name) = &h.stream {
            if len > MAX_XATTR as u64 {
                return Err(VfsError::DiskFull);
            }
            let now = st.tick();
            st.stream_mut(id, name)?.resize(len as usize, 0);
            st.node_mut(id)?.change_time = now;
            return Ok(());
        }
        // ftruncate refuses a descriptor not open for writing, and a
        // length that is negative as an off_t, with EINVAL.
        if !node.writable || len > MAX_OFFSET {
            return Err(VfsError::Io(Errno::INVAL.into()));
        }
        let now = st.tick();
        st.file_mut(id)?.truncate(len);
        st.node_mut(id)?.modified(now);
        Ok(())
    }

    fn set_allocation(&self, h: &FileHandle, len: u64) -> VfsResult<()> {
        let node = self.node_of(h)?;
        if h.stream.is_some() {
            return Ok(());
        }
        let mut st = self.lock();
        let allocated = st.stat(node.pin.node)?.alloc_size;
        if len <= allocated {
            return Ok(());
        }
        if !node.writable {
            return Err(bad_handle());
        }
        let now = st.tick();
        st.file_mut(node.pin.node)?.preallocate(len);
        st.node_mut(node.pin.node)?.change_time = now;
        Ok(())
    }

    fn set_times(&self, h: &FileHandle, times: &SetTimes) -> VfsResult<()> {
        let node = self.node_of(h)?;
        let mut st = self.lock();
        let now = st.tick();
        let n = st.node_mut(node.pin.node)?;
        let creation = time_to_set(times.creation_time);
        let access = time_to_set(times.last_access_time);
        let write = time_to_set(times.last_write_time);
        if let Some(t) = creation {
            n.creation_time = t;
        }
        if let Some(t) = access {
            n.last_access_time = t;
        }
        if let Some(t) = write {
            n.last_write_time = t;
        }
        // Setting any time is a change of the inode, unless the change
        // time itself is given, which is set last.
        if creation.is_some() || access.is_some() || write.is_some() {
            n.metadata_changed(now);
        }
        if let Some(t) = time_to_set(times.change_time) {
            n.change_time = t;
            n.change_time_set = true;
        }
        Ok(())
    }

    fn set_attributes(&self, h: &FileHandle, attributes: u32) -> VfsResult<()> {
        let node = self.node_of(h)?;
        let mut st = self.lock();
        let now = st.tick();
        let n = st.node_mut(node.pin.node)?;
        n.attrs = (attributes & attr::SETTABLE) | (n.attrs & attr::SPARSE_FILE);
        n.metadata_changed(now);
        Ok(())
    }

    fn set_sparse(&self, h: &FileHandle, sparse: bool) -> VfsResult<()> {
        let node = self.node_of(h)?;
        let id = node.pin.node;
        let mut st = self.lock();
        let now = st.tick();
        if !sparse {
            let data = st.file_mut(id)?;
            let size = data.size;
            data.preallocate(size);
        }
        let n = st.node_mut(id)?;
        if sparse {
            n.attrs |= attr::SPARSE_FILE;
        } else {
            n.attrs &= !attr::SPARSE_FILE;
        }
        n.metadata_changed(now);
        Ok(())
    }

    fn zero_range(&self, h: &FileHandle, offset: u64, len: u64, deallocate: bool) -> VfsResult<()> {
        let node = self.node_of(h)?;
        let id = node.pin.node;
        let end = offset.saturating_add(len);
        let mut st = self.lock();
        let now = st.tick();
        if let Some(name) = &h.stream {
            let value = st.stream_mut(id, name)?;
            let end = (end.min(value.len() as u64)) as usize;
            if let Some(zeroed) = value.get_mut(offset as usize..end) {
                zeroed.fill(0);
            }
        } else {
            st.file_mut(id)?.zero(offset, end, deallocate);
        }
        st.node_mut(id)?.modified(now);
        Ok(())
    }

    fn allocated_ranges(
        &self,
        h: &FileHandle,
        offset: u64,
        end: u64,
        limit: usize,
    ) -> VfsResult<Vec<std::ops::Range<u64>>> {
        let node = self.node_of(h)?;
        let mut st = self.lock();
        if let Some(name) = &h.stream {
            let end = end.min(st.stream_mut(node.pin.node, name)?.len() as u64);
            return Ok((offset < end && limit > 0)
                .then_some(offset..end)
                .into_iter()
                .collect());
        }
        let data = st.file_mut(node.pin.node)?;
        Ok(data.allocated(offset, end.min(data.size), limit))
    }

    fn list_names(&self, h: &FileHandle) -> VfsResult<Vec<String>> {
        let node = self.node_of(h)?;
        let st = self.lock();
        let children = st
            .node(node.pin.node)?
            .children()
            .ok_or(VfsError::NotADirectory)?;
        Ok(children.keys().cloned().collect())
    }

    fn entry(&self, dir: &FileHandle, name: &str) -> VfsResult<Option<FileStat>> {
        let node = self.node_of(dir)?;
        let st = self.lock();
        // A lookup relative to a file fails as ENOTDIR does.
        let children = st
            .node(node.pin.node)?
            .children()
            .ok_or(VfsError::PathNotFound)?;
        if name.len() > NAME_MAX {
            return Err(VfsError::InvalidName);
        }
        match children.get(name) {
            Some(&id) => st.stat(id).map(Some),
            None => Ok(None),
        }
    }

    fn is_empty_dir(&self, h: &FileHandle) -> VfsResult<bool> {
        let node = self.node_of(h)?;
        let st = self.lock();
        match st.node(node.pin.node)?.children() {
            Some(children) => Ok(children.is_empty()),
            None => Err(VfsError::Io(Errno::NOTDIR.into())),
        }
    }

    fn rename(&self, _who: &Identity, from: &str, to: &str, replace: bool) -> VfsResult<String> {
        let from_comps = split(from)?;
        let to_comps = split(to)?;
        let (Some((from_name, from_parents)), Some((to_name, to_parents))) =
            (from_comps.split_last(), to_comps.split_last())
        else {
            // The root can be neither moved nor replaced.
            return Err(VfsError::AccessDenied);
        };
        let mut st = self.lock();
        st.sweep();
        let (from_dir, _) = st.resolve_dir(from_parents)?;
        let (src_name, src) = st
            .find_child(from_dir, from_name)?
            .ok_or(VfsError::NameNotFound)?;
        let (to_dir, to_real) = st.resolve_dir(to_parents)?;
        let target = st.find_child(to_dir, to_name)?;
        let new_path = join(&to_real, to_name);
        if let Some((_, t)) = &target {
            if *t == src && from_dir == to_dir {
                // The target is the source itself: only the case changes.
                if src_name != *to_name {
                    let now = st.tick();
                    st.move_entry(from_dir, &src_name, to_dir, to_name, now);
                }
                return Ok(new_path);
            }
        }
        let src_is_dir = st.node(src)?.is_dir();
        if let Some((_, t)) = &target {
            if !replace {
                return Err(VfsError::Collision);
            }
            if st.node(*t)?.is_dir() {
                return Err(VfsError::AccessDenied);
            }
        }
        // Linux refuses to move a directory beneath itself (EINVAL), and
        // then one onto a file (ENOTDIR).
        if src_is_dir && st.is_within(to_dir, src) {
            return Err(VfsError::InvalidName);
        }
        if src_is_dir && target.is_some() {
            return Err(VfsError::PathNotFound);
        }
        let now = st.tick();
        if let Some((t_name, t)) = target {
            if let Some(children) = st.node_mut(to_dir)?.children_mut() {
                children.remove(&t_name);
            }
            st.detach(t, now);
        }
        st.move_entry(from_dir, &src_name, to_dir, to_name, now);
        Ok(new_path)
    }

    fn unix_access(&self, h: &FileHandle) -> VfsResult<UnixAccess> {
        let node = self.node_of(h)?;
        let st = self.lock();
        let n = st.node(node.pin.node)?;
        Ok(UnixAccess::from_mode(n.perm, n.uid, n.gid, h.who()))
    }

    /// Memory objects keep their permission bits out of listings: whoever
    /// may list may read.
    fn may_read_entry(&self, _dir: &FileHandle, _name: &str) -> VfsResult<bool> {
        Ok(true)
    }

    /// Memory objects keep their permission bits out of listings: whoever
    /// opened a directory may list what is beneath it.
    fn may_list_beneath(&self, _dir: &FileHandle, _path: &str) -> VfsResult<bool> {
        Ok(true)
    }

    /// Memory objects keep their permission bits out of deleting: whoever
    /// may open may delete.
    fn may_delete(&self, _who: &Identity, _path: &str) -> VfsResult<()> {
        Ok(())
    }

    fn unlink(&self, _who: &Identity, path: &str, is_dir: bool) -> VfsResult<()> {
        let comps = split(path)?;
        let Some((last, parents)) = comps.split_last() else {
            return Err(VfsError::AccessDenied);
        };
        let mut st = self.lock();
        st.sweep();
        let (dir, _) = st.resolve_dir(parents)?;
        let (name, id) = st.find_child(dir, last)?.ok_or(VfsError::NameNotFound)?;
        match st.node(id)?.children() {
            Some(_) if !is_dir => return Err(VfsError::IsADirectory),
            None if is_dir => return Err(VfsError::NotADirectory),
            Some(children) if !children.is_empty() => return Err(VfsError::NotEmpty),
            _ => {}
        }
        let now = st.tick();
        let parent = st.node_mut(dir)?;
        parent.modified(now);
        if let Some(children) = parent.children_mut() {
            children.remove(&name);
        }
        st.detach(id, now);
        Ok(())
    }

    fn make_dir_for(&self, owner: &Identity, path: &str, mode: u32) -> VfsResult<()> {
        let made = self.open(&OpenRequest {
            who: &Identity::Server,
            path,
            disposition: Disposition::Create,
            kind: Kind::Directory,
            read: false,
            write: false,
            attributes: 0,
            allocation_size: 0,
            unlink_asked: false,
        });
        match made {
            Ok(o) => {
                let (uid, gid) = match owner {
                    Identity::Unix(ids) => (ids.uid, ids.gid),
                    Identity::Server => (0, 0),
                };
                self.set_owner(&o.path, uid, gid, mode)
            }
            Err(VfsError::Collision) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn fs_stat(&self) -> VfsResult<FsStat> {
        let st = self.lock();
        let used: u64 = st
            .nodes
            .values()
            .map(|n| match &n.body {
                Body::File(data) => data.alloc_size() / BLOCK,
                Body::Dir(_) => 1,
            })
            .sum();
        let free = TOTAL_BLOCKS.saturating_sub(used);
        Ok(FsStat {
            block_size: BLOCK as u32,
            total_blocks: TOTAL_BLOCKS,
            free_blocks: free,
            avail_blocks: free,
            fs_id: DEV,
            max_name_len: NAME_MAX as u32,
            clones: false,
            compresses: false,
            quotas: QuotaState {
                tracked: st.quotas.is_some(),
                enforced: st.quotas.is_some(),
            },
        })
    }

    fn quota(&self, who: &Identity, uid: u32) -> VfsResult<Quota> {
        let st = self.lock();
        let quotas = st.quotas.as_ref().ok_or(VfsError::NotSupported)?;
        if let Identity::Unix(ids) = who {
            // As the kernel: only one's own entry, without CAP_SYS_ADMIN.
            if ids.uid != uid {
                return Err(VfsError::AccessDenied);
            }
        }
        let (soft, hard) = quotas.get(&uid).copied().unwrap_or_default();
        Ok(Quota {
            used: st.used_by(uid),
            soft,
            hard,
        })
    }

    fn next_quota(&self, who: &Identity, from: u32) -> VfsResult<Option<(u32, Quota)>> {
        let next = {
            let st = self.lock();
            let quotas = st.quotas.as_ref().ok_or(VfsError::NotSupported)?;
            if matches!(who, Identity::Unix(_)) {
                return Err(VfsError::AccessDenied);
            }
            let users = st.nodes.values().filter(|n| n.uid >= from).map(|n| n.uid);
            users.chain(quotas.range(from..).map(|(&u, _)| u)).min()
        };
        next.map(|uid| Ok((uid, self.quota(who, uid)?))).transpose()
    }

    fn set_quota(&self, who: &Identity, uid: u32, soft: u64, hard: u64) -> VfsResult<()> {
        if matches!(who, Identity::Unix(_)) {
            return Err(VfsError::AccessDenied);
        }
        let mut st = self.lock();
        let quotas = st.quotas.as_mut().ok_or(VfsError::NotSupported)?;
        if soft == 0 && hard == 0 {
            quotas.remove(&uid);
        } else {
            quotas.insert(uid, (soft, hard));
        }
        Ok(())
    }

    fn security(&self, h: &FileHandle) -> VfsResult<Option<Vec<u8>>> {
        let node = self.node_of(h)?;
        let st = self.lock();
        if !st.acls_in_use {
            return Ok(None);
        }
        Ok(st.node(node.pin.node)?.security.clone())
    }

    fn set_security(&self, h: &FileHandle, sd: &[u8]) -> VfsResult<()> {
        let node = self.node_of(h)?;
        if sd.len() > MAX_XATTR {
            return Err(VfsError::DiskFull);
        }
        let mut st = self.lock();
        st.acls_in_use = true;
        let now = st.tick();
        let n = st.node_mut(node.pin.node)?;
        n.security = Some(sd.to_vec());
        n.change_time = now;
        Ok(())
    }

    fn descriptors_stored(&self) -> bool {
        self.lock().acls_in_use
    }

    fn eas(&self, h: &FileHandle) -> VfsResult<Vec<Ea>> {
        let node = self.node_of(h)?;
        Ok(self.lock().node(node.pin.node)?.eas.clone())
    }

    fn set_eas(&self, h: &FileHandle, changes: &[Ea]) -> VfsResult<()> {
        let node = self.node_of(h)?;
        let mut st = self.lock();
        st.eas_in_use = true;
        let now = st.tick();
        let n = st.node_mut(node.pin.node)?;
        let mut set = n.eas.clone();
        crate::eas::merge(&mut set, changes);
        if crate::eas::encode(&set).len() > MAX_XATTR {
            return Err(VfsError::DiskFull);
        }
        n.eas = set;
        n.metadata_changed(now);
        Ok(())
    }

    fn eas_stored(&self) -> bool {
        self.lock().eas_in_use
    }

    fn found_without_waiting(&self, _path: &str) -> bool {
        true
    }

    fn dir_security(&self, _who: &Identity, path: &str) -> VfsResult<Option<(Vec<u8>, u32)>> {
        let st = self.lock();
        if !st.acls_in_use {
            return Ok(None);
        }
        // The real path, so no case folding: as PosixVfs opens it.
        let mut id = ROOT;
        for comp in split(path)? {
            if comp.len() > NAME_MAX {
                return Err(VfsError::InvalidName);
            }
            let children = st.node(id)?.children().ok_or(VfsError::PathNotFound)?;
            id = *children.get(comp).ok_or(VfsError::NameNotFound)?;
        }
        let node = st.node(id)?;
        if !node.is_dir() {
            return Err(VfsError::PathNotFound);
        }
        Ok(node.security.clone().map(|sd| (sd, node.uid)))
    }

    fn open_stream(
        &self,
        base: &FileHandle,
        name: &str,
        disposition: Disposition,
    ) -> VfsResult<(FileHandle, CreateAction)> {
        let node = self.node_of(base)?;
        let id = node.pin.node;
        let mut st = self.lock();
        let (real, action) = match (st.find_stream(id, name)?, disposition) {
            (Some(_), Disposition::Create) => return Err(VfsError::Collision),
            (Some(real), Disposition::Open | Disposition::OpenIf) => (real, CreateAction::Opened),
            (Some(real), d) => {
                let action = if d == Disposition::Supersede {
                    CreateAction::Superseded
                } else {
                    CreateAction::Overwritten
                };
                let now = st.tick();
                st.stream_mut(id, &real)?.clear();
                st.node_mut(id)?.change_time = now;
                (real, action)
            }
            (None, Disposition::Open | Disposition::Overwrite) => {
                return Err(VfsError::NameNotFound)
            }
            (None, _) => {
                if name.len() > MAX_STREAM_NAME {
                    return Err(VfsError::InvalidName);
                }
                let now = st.tick();
                let n = st.node_mut(id)?;
                n.streams.insert(name.to_owned(), Vec::new());
                n.change_time = now;
                (name.to_owned(), CreateAction::Created)
            }
        };
        let handle = self
            .handle(&mut st, id, node.writable, Some(real.into()))?
            .acting_as(base.who());
        Ok((handle, action))
    }

    fn streams(&self, h: &FileHandle) -> VfsResult<Vec<(String, u64)>> {
        let node = self.node_of(h)?;
        let st = self.lock();
        Ok(st
            .node(node.pin.node)?
            .streams
            .iter()
            .map(|(name, data)| (name.clone(), data.len() as u64))
            .collect())
    }

    fn delete_stream(&self, h: &FileHandle) -> VfsResult<()> {
        let node = self.node_of(h)?;
        let Some(name) = &h.stream else {
            return Err(VfsError::IsADirectory);
        };
        let mut st = self.lock();
        let now = st.tick();
        let n = st.node_mut(node.pin.node)?;
        if n.streams.remove(&**name).is_some() {
            n.change_time = now;
        }
        Ok(())
    }

    fn rename_stream(&self, h: &FileHandle, to: &str, replace: bool) -> VfsResult<String> {
        let node = self.node_of(h)?;
        let id = node.pin.node;
        let from = h.stream.as_deref().ok_or(VfsError::IsADirectory)?;
        if to.len() > MAX_STREAM_NAME {
            return Err(VfsError::InvalidName);
        }
        let mut st = self.lock();
        match st.find_stream(id, to)? {
            Some(target) if target == from => {}
            Some(_) if !replace => return Err(VfsError::Collision),
            Some(target) => {
                if !st.stream_mut(id, &target)?.is_empty() {
                    return Err(VfsError::NotEmpty);
                }
                st.node_mut(id)?.streams.remove(&target);
            }
            None => {}
        }
        let data = std::mem::take(st.stream_mut(id, from)?);
        let now = st.tick();
        let n = st.node_mut(id)?;
        n.streams.remove(from);
        n.streams.insert(to.to_owned(), data);
        n.change_time = now;
        Ok(to.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_file_data() {
        let mut f = FileData::default();
        f.write(BLOCK * 3 - 2, b"abcd");
        assert_eq!(f.size, BLOCK * 3 + 2);
        assert_eq!(f.blocks.len(), 2);
        assert_eq!(f.alloc_size(), 2 * BLOCK);
        let mut buf = vec![9u8; 8];
        assert_eq!(f.read(BLOCK * 3 - 4, &mut buf), 6);
        assert_eq!(&buf[..6], b"\0\0abcd");
        assert_eq!(f.read(0, &mut buf), 8);
        assert_eq!(buf, [0; 8]);
        f.truncate(BLOCK * 3 - 1);
        assert_eq!(f.blocks.len(), 1);
        f.truncate(BLOCK * 3 + 2);
        assert_eq!(f.read(BLOCK * 3 - 2, &mut buf), 4);
        assert_eq!(&buf[..4], b"a\0\0\0", "cut bytes read back as zeros");
        f.preallocate(1);
        assert_eq!(f.alloc_size(), 2 * BLOCK);
        f.preallocate(BLOCK * 4);
        assert_eq!(f.alloc_size(), 4 * BLOCK);
        f.truncate(0);
        assert_eq!((f.size, f.alloc_size()), (0, 0));
    }

    #[test]
    fn unlinked_nodes_live_while_held() {
        let vfs = MemoryVfs::new();
        let req = |path| OpenRequest {
            who: &Identity::Server,
            path,
            disposition: Disposition::Create,
            kind: Kind::NonDirectory,
            read: true,
            write: true,
            attributes: 0,
            allocation_size: 0,
            unlink_asked: false,
        };
        let kept = vfs.open(&req("kept")).unwrap();
        let other = vfs.open(&req("other")).unwrap();
        vfs.write(&kept.handle, 0, b"still here").unwrap();
        vfs.unlink(&Identity::Server, "kept", false).unwrap();
        drop(other);
        vfs.unlink(&Identity::Server, "other", false).unwrap();
        // Only the held one is kept.
        assert_eq!(vfs.lock().nodes.len(), 2);
        let mut buf = [0u8; 16];
        assert_eq!(vfs.read(&kept.handle, 0, &mut buf).unwrap(), 10);
        assert_eq!(vfs.stat(&kept.handle).unwrap().nlink, 0);
        drop(kept);
        vfs.open(&req("next")).unwrap();
        assert_eq!(vfs.lock().nodes.len(), 2, "the root and the new file");
    }

    #[test]
    fn handles_of_another_instance_are_refused() {
        let a = MemoryVfs::new();
        let b = MemoryVfs::new();
        let root = a
            .open(&OpenRequest {
                who: &Identity::Server,
                path: "",
                disposition: Disposition::Open,
                kind: Kind::Any,
                read: true,
                write: false,
                attributes: 0,
                allocation_size: 0,
                unlink_asked: false,
            })
            .unwrap();
        assert!(matches!(b.stat(&root.handle), Err(VfsError::Io(_))));
        assert!(a.stat(&root.handle).unwrap().is_dir);
        assert!(root.handle.fd().is_none());
    }
}
