// The lab's container runtime streaming server: what containerd's CRI plugin serves for kubelet's
// exec, attach and port-forward, served here by the same package (k8s.io/cri-streaming, the
// streaming server kubelet and containerd share) for the lab's containers, which are processes.
//
// The lab's kubelet (lab/kubelet/) starts it and asks it, one JSON object per line on stdin, for
// the URL of a request as kubelet asks its runtime over CRI (Exec, Attach, PortForward); the answer
// (one line on stdout) is the URL it proxies the caller's upgraded connection to, as kubelet does.
// Container and sandbox IDs are the lab runtime's (`lab://<pid>`, what the pod status reports).
//
//   - exec: the command runs in the container's namespaces (mount, UTS, IPC, network), root and
//     working directory (nsenter), with the container process's environment, user, groups,
//     capability bounding set and no_new_privs (setpriv), on a terminal when asked (a pty, resized
//     as the client asks); a non-zero exit is reported with its code, as kubectl shows it;
//   - attach: the container's output from now on (its stdout, the container log it writes to),
//     until it exits; the lab starts containers without stdin, so input is not delivered;
//   - port-forward: a connection to the port on the pod's loopback, dialled from the pod's network
//     namespace, as containerd does it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// request is one question from the kubelet: the fields of CRI's ExecRequest, AttachRequest and
// PortForwardRequest.
type request struct {
	Kind         string   `json:"kind"`
	ContainerID  string   `json:"container_id,omitempty"`
	PodSandboxID string   `json:"pod_sandbox_id,omitempty"`
	Cmd          []string `json:"cmd,omitempty"`
	Tty          bool     `json:"tty,omitempty"`
	Stdin        bool     `json:"stdin,omitempty"`
	Stdout       bool     `json:"stdout,omitempty"`
	Stderr       bool     `json:"stderr,omitempty"`
	Ports        []int32  `json:"ports,omitempty"`
}

type answer struct {
	URL   string `json:"url,omitempty"`
	Error string `json:"error,omitempty"`
}

func main() {
	address := flag.String("address", "127.0.0.1:0", "where the streaming server listens (containerd's stream_server_address and port)")
	flag.Parse()
	listener, err := net.Listen("tcp", *address)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-streaming: %v\n", err)
		os.Exit(1)
	}
	config := streaming.DefaultConfig
	config.Addr = listener.Addr().String()
	config.BaseURL = &url.URL{Scheme: "http", Host: listener.Addr().String()}
	server, err := streaming.NewServer(config, labRuntime{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-streaming: %v\n", err)
		os.Exit(1)
	}
	go func() {
		httpServer := &http.Server{Handler: server, ReadHeaderTimeout: 30 * time.Second}
		if err := httpServer.Serve(listener); err != nil {
			fmt.Fprintf(os.Stderr, "cri-streaming: %v\n", err)
			os.Exit(1)
		}
	}()
	fmt.Fprintf(os.Stderr, "cri-streaming: serving on %s\n", listener.Addr())
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 1<<16), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for lines.Scan() {
		var req request
		var reply answer
		if err := json.Unmarshal(lines.Bytes(), &req); err != nil {
			reply.Error = fmt.Sprintf("malformed request: %v", err)
		} else {
			reply.URL, err = get(server, req)
			if err != nil {
				reply.Error = err.Error()
			}
		}
		if err := out.Encode(reply); err != nil {
			os.Exit(1)
		}
	}
	// stdin closed: the kubelet that started us is gone
}

func get(server streaming.Server, req request) (string, error) {
	switch req.Kind {
	case "exec":
		resp, err := server.GetExec(&runtimeapi.ExecRequest{
			ContainerId: req.ContainerID, Cmd: req.Cmd, Tty: req.Tty, Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr,
		})
		if err != nil {
			return "", err
		}
		return resp.Url, nil
	case "attach":
		resp, err := server.GetAttach(&runtimeapi.AttachRequest{
			ContainerId: req.ContainerID, Tty: req.Tty, Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr,
		})
		if err != nil {
			return "", err
		}
		return resp.Url, nil
	case "portforward":
		resp, err := server.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: req.PodSandboxID, Port: req.Ports})
		if err != nil {
			return "", err
		}
		return resp.Url, nil
	}
	return "", fmt.Errorf("unknown request kind %q (exec, attach or portforward)", req.Kind)
}

// labRuntime runs the streams against the lab's containers, which are processes.
type labRuntime struct{}

func processOf(id string) (int, error) {
	pid, err := strconv.Atoi(strings.TrimPrefix(id, "lab://"))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%q is not a lab container ID (lab://<pid>)", id)
	}
	if err := unix.Kill(pid, 0); err != nil {
		return 0, fmt.Errorf("container %s is not running: %v", id, err)
	}
	return pid, nil
}

// identity is what an exec'd process inherits from the container's process.
type identity struct {
	uid, gid    string
	groups      []string
	bounding    uint64
	noNewPrivs  bool
	environment []string
}

func readIdentity(pid int) (identity, error) {
	var id identity
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return id, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		fields := strings.Fields(value)
		switch key {
		case "Uid":
			id.uid = fields[1] // effective
		case "Gid":
			id.gid = fields[1]
		case "Groups":
			id.groups = fields
		case "CapBnd":
			id.bounding, err = strconv.ParseUint(fields[0], 16, 64)
			if err != nil {
				return id, fmt.Errorf("CapBnd %q: %v", fields[0], err)
			}
		case "NoNewPrivs":
			id.noNewPrivs = len(fields) > 0 && fields[0] == "1"
		}
	}
	if id.uid == "" || id.gid == "" {
		return id, fmt.Errorf("/proc/%d/status names no Uid or Gid", pid)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return id, err
	}
	for _, entry := range strings.Split(string(environ), "\x00") {
		if entry != "" {
			id.environment = append(id.environment, entry)
		}
	}
	return id, nil
}

// execArgs: nsenter into the container's namespaces, root and working directory, then setpriv to
// its user, groups and bounding set, then the command.
func execArgs(pid int, id identity, cmd []string) []string {
	args := []string{
		"--target", strconv.Itoa(pid), "--mount", "--uts", "--ipc", "--net", "--root", "--wd", "--",
		"setpriv", "--reuid", id.uid, "--regid", id.gid,
	}
	if len(id.groups) == 0 {
		args = append(args, "--clear-groups")
	} else {
		args = append(args, "--groups", strings.Join(id.groups, ","))
	}
	bounding := []string{"-all"}
	for capability := 0; capability < 64; capability++ {
		if id.bounding&(1<<capability) != 0 {
			bounding = append(bounding, fmt.Sprintf("+cap_%d", capability))
		}
	}
	args = append(args, "--bounding-set", strings.Join(bounding, ","))
	if id.noNewPrivs {
		args = append(args, "--no-new-privs")
	}
	args = append(args, "--")
	return append(args, cmd...)
}

func (labRuntime) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	pid, err := processOf(containerID)
	if err != nil {
		return err
	}
	id, err := readIdentity(pid)
	if err != nil {
		return fmt.Errorf("reading container %s: %v", containerID, err)
	}
	command := exec.CommandContext(ctx, "nsenter", execArgs(pid, id, cmd)...)
	command.Env = id.environment
	if tty {
		terminal, err := pty.Start(command)
		if err != nil {
			return err
		}
		defer terminal.Close()
		go func() {
			for size := range resize {
				_ = pty.Setsize(terminal, &pty.Winsize{Rows: size.Height, Cols: size.Width})
			}
		}()
		if in != nil {
			go func() { _, _ = io.Copy(terminal, in) }()
		}
		if out != nil {
			_, _ = io.Copy(out, terminal) // ends with EIO when the last holder of the terminal exits
		}
		return exitError(command.Wait())
	}
	if in != nil {
		stdin, err := command.StdinPipe()
		if err != nil {
			return err
		}
		go func() {
			_, _ = io.Copy(stdin, in)
			_ = stdin.Close()
		}()
	}
	if out != nil {
		command.Stdout = out
	}
	if errOut != nil {
		command.Stderr = errOut
	}
	return exitError(command.Run())
}

// exitError: a command that ran and exited non-zero, in the form the streaming server reports
// with its code (kubectl: "command terminated with exit code N").
func exitError(err error) error {
	var exited *exec.ExitError
	if errors.As(err, &exited) && exited.ExitCode() >= 0 {
		return utilexec.CodeExitError{Err: err, Code: exited.ExitCode()}
	}
	return err
}

func (labRuntime) Attach(ctx context.Context, containerID string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	pid, err := processOf(containerID)
	if err != nil {
		return err
	}
	// The container's stdout is its log (the lab's kubelet starts it so, stderr on the same file).
	output, err := os.Open(fmt.Sprintf("/proc/%d/fd/1", pid))
	if err != nil {
		return fmt.Errorf("attaching to container %s: %v", containerID, err)
	}
	defer output.Close()
	if _, err := output.Seek(0, io.SeekEnd); err != nil {
		return fmt.Errorf("attaching to container %s: %v", containerID, err)
	}
	sink := out
	if sink == nil {
		sink = errOut
	}
	if in != nil {
		go func() { _, _ = io.Copy(io.Discard, in) }() // no stdin in a lab container
	}
	buffer := make([]byte, 32*1024)
	for {
		n, readErr := output.Read(buffer)
		if n > 0 && sink != nil {
			if _, err := sink.Write(buffer[:n]); err != nil {
				return nil // the client went away
			}
		}
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return readErr
		}
		if n == 0 {
			if unix.Kill(pid, 0) != nil {
				return nil // the container exited
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

func (labRuntime) PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error {
	pid, err := processOf(podSandboxID)
	if err != nil {
		return err
	}
	conn, err := dialInNamespace(pid, port)
	if err != nil {
		return fmt.Errorf("failed to connect to localhost:%d inside namespace %q, IPv4: %v", port, podSandboxID, err)
	}
	defer conn.Close()
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, stream)
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		done <- err
	}()
	go func() {
		_, err := io.Copy(stream, conn)
		done <- err
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-done:
		return err
	}
}

// dialInNamespace connects to the port on the pod's loopback from the pod's network namespace: the
// socket is made on an OS thread that joined it, and keeps it; the thread is never given back
// (it ends with its goroutine), so no other goroutine runs in the pod's namespace.
func dialInNamespace(pid int, port int32) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	results := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		namespace, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			results <- result{err: err}
			return
		}
		defer unix.Close(namespace)
		if err := unix.Setns(namespace, unix.CLONE_NEWNET); err != nil {
			results <- result{err: fmt.Errorf("setns: %v", err)}
			return
		}
		conn, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), 10*time.Second)
		results <- result{conn, err}
	}()
	r := <-results
	return r.conn, r.err
}
