package session

import (
	"context"
	"errors"
)

func OpenRedis(ctx context.Context, url string, b Bounds, o OpenOptions) (Store, error) {
	return nil, errors.New("todo")
}
