package redlock

import (
	"encoding/json"
	"fmt"
	"time"
)

// LockInfo is a snapshot of one lock name.
type LockInfo struct {
	Name string
	// Mode is Write while a writer holds it (even if it also reads after a downgrade), Read
	// while only readers do, and 0 (String "none") when free.
	Mode Mode
	// Holders lists up to 100 holders, the writer first.
	Holders []HolderInfo
	// HolderCount counts every live holder, even past the listing limit.
	HolderCount    uint64
	WaitingWriters uint64
	WaitingReaders uint64
	// LeaseLeft is the time until the last lease of the name ends (0 when free).
	LeaseLeft time.Duration
	// LastFencingToken is the newest fencing token issued in the name's hash slot: an upper bound
	// on the name's own last token.
	LastFencingToken uint64
}

// HolderInfo is one holder of a lock, with the description stored when it acquired.
type HolderInfo struct {
	Mode         Mode
	OwnerToken   string
	HoldCount    uint32
	FencingToken uint64
	LeaseLeft    time.Duration
	HeldFor      time.Duration // 0 when unknown
	Host         string
	PID          uint32
	Thread       string // the label given at acquisition (WithLabel), or the OS thread
	AcquiredAt   time.Time
}

// The library's JSON (see rl_lock_inspect in redlock.h).
type rawLockInfo struct {
	Name             string      `json:"name"`
	Mode             *string     `json:"mode"`
	HolderCount      uint64      `json:"holder_count"`
	LeaseLeftMS      *uint64     `json:"lease_left_ms"`
	WaitingWriters   uint64      `json:"waiting_writers"`
	WaitingReaders   uint64      `json:"waiting_readers"`
	LastFencingToken uint64      `json:"last_fencing_token"`
	Holders          []rawHolder `json:"holders"`
}

type rawHolder struct {
	Mode         string  `json:"mode"`
	OwnerToken   string  `json:"owner_token"`
	HoldCount    uint32  `json:"hold_count"`
	FencingToken uint64  `json:"fencing_token"`
	LeaseLeftMS  uint64  `json:"lease_left_ms"`
	HeldForMS    *uint64 `json:"held_for_ms"`
	Host         string  `json:"host"`
	PID          uint32  `json:"pid"`
	Thread       string  `json:"thread"`
	AcquiredAtMS int64   `json:"acquired_at_ms"`
}

func modeOf(word string) Mode {
	switch word {
	case "read":
		return Read
	case "write":
		return Write
	}
	return 0
}

func ms(n uint64) time.Duration { return time.Duration(n) * time.Millisecond }

func parseLockInfo(text string) (*LockInfo, error) {
	var raw rawLockInfo
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, &Error{Op: "inspect", Kind: ErrInternal, Message: fmt.Sprintf("unreadable inspect result %q: %v", text, err)}
	}
	info := &LockInfo{
		Name:             raw.Name,
		Holders:          convertHolders(raw.Holders),
		HolderCount:      raw.HolderCount,
		WaitingWriters:   raw.WaitingWriters,
		WaitingReaders:   raw.WaitingReaders,
		LastFencingToken: raw.LastFencingToken,
	}
	if raw.Mode != nil {
		info.Mode = modeOf(*raw.Mode)
	}
	if raw.LeaseLeftMS != nil {
		info.LeaseLeft = ms(*raw.LeaseLeftMS)
	}
	return info, nil
}

func convertHolders(raw []rawHolder) []HolderInfo {
	holders := make([]HolderInfo, 0, len(raw))
	for _, h := range raw {
		holder := HolderInfo{
			Mode:         modeOf(h.Mode),
			OwnerToken:   h.OwnerToken,
			HoldCount:    h.HoldCount,
			FencingToken: h.FencingToken,
			LeaseLeft:    ms(h.LeaseLeftMS),
			Host:         h.Host,
			PID:          h.PID,
			Thread:       h.Thread,
		}
		if h.HeldForMS != nil {
			holder.HeldFor = ms(*h.HeldForMS)
		}
		if h.AcquiredAtMS > 0 {
			holder.AcquiredAt = time.UnixMilli(h.AcquiredAtMS)
		}
		holders = append(holders, holder)
	}
	return holders
}
