package redlock

/*
#include <stdlib.h>
#include "redlock.h"
*/
import "C"

import (
	"runtime"
)

// Owner identifies one holder. Whoever presents its token is the owner: a lock taken with an
// owner in one goroutine, process or language is released or extended in another by presenting
// the token (see OwnerFromToken). Safe for concurrent use.
type Owner struct {
	h     C.rl_owner
	token string
}

// NewOwner returns a fresh random owner (a UUID v4 and a process id: at least 122 random bits).
func NewOwner() *Owner {
	var h C.rl_owner
	err := call("new owner", func(e *C.rl_error) C.rl_status { return C.rl_owner_random(&h, e) })
	if err != nil {
		// Creating a random owner touches no I/O; failing here is a bug in the library.
		panic(err)
	}
	return newOwner(h)
}

// OwnerFromToken returns the owner a token stands for, e.g. a token handed over by another
// instance. The token is 1..512 bytes of UTF-8; anything else is ErrInvalidArgument.
func OwnerFromToken(token string) (*Owner, error) {
	cToken, err := cString("token", token)
	if err != nil {
		return nil, err
	}
	defer freeCString(cToken)
	var h C.rl_owner
	err = call("owner from token", func(e *C.rl_error) C.rl_status {
		return C.rl_owner_from_token(cToken, &h, e)
	})
	if err != nil {
		return nil, err
	}
	return newOwner(h), nil
}

func newOwner(h C.rl_owner) *Owner {
	var token *C.char
	err := call("owner token", func(e *C.rl_error) C.rl_status { return C.rl_owner_token(h, &token, e) })
	if err != nil {
		panic(err) // the handle was made just now
	}
	o := &Owner{h: h, token: C.GoString(token)}
	C.rl_string_free(token)
	runtime.AddCleanup(o, freeOwner, uint64(h.id))
	return o
}

func freeOwner(id uint64) {
	h := C.rl_owner{id: C.uint64_t(id)}
	C.rl_owner_free(&h, nil)
}

// Token is the owner's token, to hand to another holder.
func (o *Owner) Token() string { return o.token }

func (o *Owner) String() string { return o.token }
