package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"coord/client"
	"coord/vocab"
)

// A session that publishes a config znode and follows changes to it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, events, err := client.Connect(ctx, []string{"127.0.0.1:7000", "127.0.0.2:7000"},
		client.WithSessionTimeout(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(context.Background())
	go func() {
		for ev := range events {
			fmt.Println("session:", ev.State)
		}
	}()

	_, err = c.Create(ctx, "/config", []byte("v1"), vocab.ModePersistent, vocab.OpenACLUnsafe)
	if err != nil && !errors.Is(err, vocab.NodeExists) {
		fmt.Println(err)
		return
	}
	data, stat, changed, err := c.GetW(ctx, "/config")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("config %q at version %d\n", data, stat.Version)
	if _, err := c.Set(ctx, "/config", []byte("v2"), stat.Version); errors.Is(err, vocab.BadVersion) {
		fmt.Println("someone else changed it first")
	}
	ev := <-changed
	fmt.Println(ev.Type, ev.Path)
}

// Multi applies several changes atomically.
func ExampleConn_Multi() {
	ctx := context.Background()
	c, _, err := client.Connect(ctx, []string{"127.0.0.1:7000"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)
	_, err = c.Multi(ctx,
		client.CheckOp{Path: "/config", Version: 3},
		client.SetDataOp{Path: "/config", Data: []byte("v4"), Version: client.AnyVersion},
		client.CreateOp{Path: "/config/history-", Mode: vocab.ModePersistentSequential, ACL: vocab.OpenACLUnsafe},
	)
	var fe *vocab.Error
	if errors.As(err, &fe) {
		fmt.Println("multi failed at", fe.Path, fe.Code)
	}
}
