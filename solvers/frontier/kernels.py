"""The compiled kernels of the frontier engine: keys, move expansion, sorted key sets,
the dead table and the resumable depth-first search, all over uint64 bitboards.

Compiled with numba (`cache=True`: the first run on a machine compiles for about half
a minute and writes the cache; later runs load it). Every function takes plain numpy
arrays: the tables come from `problem` (rules grouped by cell, key maps, pruning).
"""

import numpy as np
from numba import njit

_ONE = np.uint64(1)
_BYTE = np.uint64(255)
_EIGHT = np.uint64(8)
#: The `prune` argument of `expand` that keeps every child.
NO_PRUNE = np.zeros(6, np.uint64)
NO_PRUNE.setflags(write=False)


@njit(cache=True)
def board_key(board, maps):
    """The key of a uint64 `board`: the least of its images under the permutations
    whose byte tables are `maps` (shape (G, bytes, 256), from `problem.key_maps`)."""
    best = ~np.uint64(0)
    for g in range(maps.shape[0]):
        image = np.uint64(0)
        rest = board
        for k in range(maps.shape[1]):
            image |= maps[g, k, rest & _BYTE]
            rest >>= _EIGHT
        if image < best:
            best = image
    return best


@njit(cache=True)
def board_keys(boards, maps):
    """`board_key` of every board of a uint64 array (shape (N,) in, (N,) out)."""
    out = np.empty(boards.shape[0], np.uint64)
    for i in range(boards.shape[0]):
        out[i] = board_key(boards[i], maps)
    return out


@njit(cache=True)
def regions_bound(board, prune):
    """The moves still needed by the Merson regions of `prune` (`problem.prune_table`:
    kind, less, singles, pairs, stars, the stars' hitting sets). Kind 1: the regions full
    on `board`, each needing a move that starts in it; kind 2: the regions not full,
    each changed by a move starting in it since a start where it was full. Counted as
    the singles, a greedy packing of disjoint pairs (each edge's pairs in order along
    it: a largest packing) and the fewest cells meeting every such star (moves start on
    one cell each; the stars lie off the pairs' cells), minus `less` (the regions that
    may stay as they are: a goal's token on a corner, a start's empty cell), at least
    0; 0 for kind 0. Kind 1 with a class table after the hitting sets returns the larger
    of this and `classes_bound`."""
    kind = prune[0]
    if kind == 0:
        return 0
    full = kind == 1
    count = tokens(board & prune[2] if full else ~board & prune[2])
    used = np.uint64(0)
    pairs = np.int64(prune[3])
    for k in range(4, 4 + pairs):
        pair = prune[k]
        if used & pair:
            continue
        if (board & pair == pair) == full:
            count += 1
            used |= pair
    at = 4 + pairs
    stars = np.int64(prune[at])
    mask = 0
    for k in range(stars):
        star = prune[at + 1 + k]
        if (board & star == star) == full:
            mask |= 1 << k
    count += np.int64(prune[at + 1 + stars + mask])
    count = max(count - np.int64(prune[1]), 0)
    at += 1 + stars + (1 << stars)
    if at < prune.shape[0]:
        count = max(count, classes_bound(board, prune, at, count))
    return count


@njit(cache=True)
def classes_bound(board, prune, at, floor):
    """The fewest moves to one token of a relaxed game on the token classes
    (`problem.class_table` at prune[at:]: n, the classes' cells, the cells each set of
    classes may jump over, the goals' classes as a bitmask). A move is made by a token of
    one class, which may land anywhere in its class and removes only tokens of other
    classes on cells that class may jump over (`problem.token_classes`: no rule jumps
    the mover's own class). So for the set S of classes that move in a finish: every
    token of a class outside S lies on a cell S may jump over; a token of a class in S
    that S may not jump over must move itself, so that class makes at least as many
    moves as it holds such tokens, and at least one; S holds the class of the last
    token (it made the last move), and a class moving alone holds one token. The bound
    is the least total over every such S; 64 when there is none (no finish at all), 0
    for fewer than two tokens. Admissible: a real finish is a finish of the relaxed
    game. Stops once a set's total is at most `floor` (the caller takes the larger)."""
    n = np.int64(prune[at])
    if n == 0 or tokens(board) < 2:
        return 0
    finals = np.int64(prune[at + 1 + n + (1 << n)])
    best = 64
    for moving in range((1 << n) - 1, 0, -1):
        if moving & finals == 0:
            continue
        reach = prune[at + 1 + n + moving]
        alone = moving & (moving - 1) == 0
        moves = 0
        for k in range(n):
            held = board & prune[at + 1 + k]
            if moving >> k & 1:
                if held == 0 or (alone and tokens(held) > 1):
                    moves = 64
                    break
                moves += max(1, tokens(held & ~reach))
            elif held & ~reach:
                moves = 64
                break
        best = min(best, moves)
        if best <= floor:
            break
    return best


_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@njit(cache=True)
def tokens(board):
    """The tokens (set bits) of a uint64 board (a branch-free population count)."""
    x = board - ((board >> _ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


@njit(cache=True)
def expand(boards, at, ptr, order, fot, cond, nxt, maps, chain, out, prune, room):
    """Keys of the children of boards[at:] into `out` until it is full: every position
    one move away (`chain`: a token goes on while it can; else single rules). Returns
    (children written, the index of the first board not expanded, children made before
    pruning, for the pruning rate); a board whose
    children do not all fit is left for the next call. prune: the Merson regions of
    `problem.prune_table` (uint64): a child whose `regions_bound` (kind 1: full regions,
    2: regions not full) exceeds `room` is not written (kind 0: every child is; the
    chain goes on through it anyway)."""
    kind = prune[0]
    written = 0
    seen = 0
    cap = out.shape[0]
    stack_b = np.empty(65, np.uint64)
    stack_p = np.empty(65, np.int64)
    stack_i = np.empty(65, np.int64)
    cells = ptr.shape[0] - 1
    i = at
    while i < boards.shape[0]:
        board = boards[i]
        mark, seen_mark = written, seen
        full = False
        for cell in range(cells):
            if (board >> np.uint64(cell)) & _ONE == 0:
                continue
            depth = 0
            stack_b[0], stack_p[0], stack_i[0] = board, cell, ptr[cell]
            while depth >= 0:
                here = stack_p[depth]
                j = stack_i[depth]
                if j >= ptr[here + 1]:
                    depth -= 1
                    continue
                stack_i[depth] = j + 1
                r = order[j]
                now = stack_b[depth]
                if now & fot[r] != cond[r]:
                    continue
                child = now ^ fot[r]
                if written >= cap:
                    full = True
                    break
                seen += 1
                if kind == 0 or regions_bound(child, prune) <= room:
                    out[written] = board_key(child, maps)
                    written += 1
                if chain:
                    depth += 1
                    stack_b[depth], stack_p[depth], stack_i[depth] = child, nxt[r], ptr[nxt[r]]
            if full:
                break
        if full:
            return mark, i, seen_mark
        i += 1
    return written, i, seen


@njit(cache=True)
def member(keys, table):
    """keys[i] in the sorted array `table`, for every i (binary search)."""
    found = np.zeros(keys.shape[0], np.bool_)
    n = table.shape[0]
    if n == 0:
        return found
    at = np.searchsorted(table, keys)
    for i in range(keys.shape[0]):
        found[i] = at[i] < n and table[at[i]] == keys[i]
    return found


def distinct(keys: np.ndarray) -> np.ndarray:
    """The sorted distinct keys (np.sort and one pass: np.unique of numpy 2.4 took 100
    times as long as np.sort on 2 million uint64 keys here)."""
    keys = np.sort(keys)
    if len(keys) < 2:
        return keys
    keep = np.empty(len(keys), bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


@njit(cache=True)
def union(a, b):
    """The sorted distinct keys of two sorted arrays of distinct keys (one merge)."""
    out = np.empty(a.shape[0] + b.shape[0], np.uint64)
    i = j = n = 0
    while i < a.shape[0] and j < b.shape[0]:
        if a[i] < b[j]:
            out[n] = a[i]
            i += 1
        elif b[j] < a[i]:
            out[n] = b[j]
            j += 1
        else:
            out[n] = a[i]
            i += 1
            j += 1
        n += 1
    while i < a.shape[0]:
        out[n] = a[i]
        i += 1
        n += 1
    while j < b.shape[0]:
        out[n] = b[j]
        j += 1
        n += 1
    return out[:n].copy()


@njit(cache=True)
def difference(a, b):
    """The keys of sorted `a` that are not in sorted `b` (one merge)."""
    keep = np.ones(a.shape[0], np.bool_)
    j = 0
    for i in range(a.shape[0]):
        while j < b.shape[0] and b[j] < a[i]:
            j += 1
        if j < b.shape[0] and b[j] == a[i]:
            keep[i] = False
    return a[keep]


@njit(cache=True)
def slot(table, key):
    """The slot of `key` in the open-addressing table `table` (uint64, a power of two
    long, 0 marking an empty slot): where it is, or the empty slot where it would go."""
    mask = np.uint64(table.shape[0] - 1)
    h = (key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)
    at = h & mask
    while table[at] != 0 and table[at] != key:
        at = (at + _ONE) & mask
    return at


@njit(cache=True)
def rehash(old, new):
    """Every key of the table `old` into the empty table `new`."""
    for key in old:
        if key != 0:
            new[slot(new, key)] = key


@njit(cache=True)
def dfs(stack_b, stack_r, state, fot, cond, goals, last, maps, dead, budget):
    """Resumable depth-first search by single rules. state = [depth, dead entries,
    outcome, grow]; outcome 1 when the board on top of the stack is a goal (the rules
    taken are stack_r[:depth] - 1), -1 when the root is refuted, 0 when the budget ran
    out. A position with `last` tokens left that is no goal is dead; every refuted
    position's key goes into the table `dead`; when it is 3/4 full the search returns
    (with outcome 0) if state[3] asks for a larger table, and otherwise goes on without
    storing more. Returns nodes visited."""
    depth = state[0]
    filled = state[1]
    limit = dead.shape[0] * 3 // 4
    nodes = 0
    rules = fot.shape[0]
    while depth >= 0 and nodes < budget:
        board = stack_b[depth]
        r = stack_r[depth]
        if r < 0:  # first visit
            nodes += 1
            r = 0
            count = 0
            rest = board
            while rest:
                rest &= rest - _ONE
                count += 1
            if count == last:
                key = board_key(board, maps)
                for g in range(goals.shape[0]):
                    if goals[g] == key:
                        state[0], state[1], state[2] = depth, filled, 1
                        return nodes
                depth -= 1
                continue
        while r < rules and board & fot[r] != cond[r]:
            r += 1
        if r == rules:  # refuted: remember it
            if filled >= limit and state[3]:
                break  # the caller doubles the table
            if filled < limit:
                key = board_key(board, maps)
                at = slot(dead, key)
                if dead[at] == 0:
                    dead[at] = key
                    filled += 1
            depth -= 1
            continue
        stack_r[depth] = r + 1
        child = board ^ fot[r]
        key = board_key(child, maps)
        if dead[slot(dead, key)] == key:
            continue
        depth += 1
        stack_b[depth] = child
        stack_r[depth] = -1
    state[0], state[1] = depth, filled
    state[2] = -1 if depth < 0 else 0
    return nodes


@njit(cache=True)
def ranks(keys, prune):
    """The order of a beam (`beam.beam`), least first, for every key of a uint64 array:
    64 times its `regions_bound` (the fewest moves it may still need) plus its tokens
    (among equal bounds, the position that has removed the most tokens)."""
    out = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        out[i] = 64 * regions_bound(keys[i], prune) + tokens(keys[i])
    return out
