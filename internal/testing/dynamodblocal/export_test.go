package dynamodblocal

// Pid returns the process ID of the server's Java process.
func (s *Server) Pid() int { return s.proc.Pid() }
